"""The one exception hierarchy of the execution environment.

::

    Exception
     └── ExecError               anything toolfold.execenv refuses or fails at
          ├── ExecConfigError    bad limits / capture options / arguments (also a ValueError)
          ├── UpdateError        an update that does not fit the view it is applied to (also a ValueError)
          ├── ExecStartError     the command could not be started (bad cwd, no shell); ``__cause__`` is the OSError
          ├── SpillError         the spill file could not be created or written; the child was killed
          ├── CallbackError      the ``on_update`` consumer raised; the child was killed; ``__cause__`` is its error
          ├── BackgroundLimitError  ``max_background`` commands already run: no other may start
          ├── HandleError        no background command with that handle, or it has ended
          └── TransportError     the exec host could not be reached, is not installed, or its connection dropped
               └── ProtocolError the exec host spoke another protocol version, or sent a malformed message

"Closed by us" and "broke underneath us" are kept apart: a timeout or a ``cancel``
event is not an error (the result says ``timed_out`` / ``cancelled``); asyncio task
cancellation of ``exec`` propagates ``CancelledError`` unchanged after teardown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._output_view import ShellOutputView


class ExecError(Exception):
    """Root of every error raised by ``toolfold.execenv``."""


class ExecConfigError(ExecError, ValueError):
    """Raised when limits, capture options or exec arguments are invalid.

    The message names the bad value and the field it was given for.
    """


class UpdateError(ExecError, ValueError):
    """Raised by ``apply_shell_output_update`` when an update cannot apply to the view.

    For example an ``Append`` with no view yet, or a ``Slide`` dropping more characters
    than the view has. The view passed in is left untouched (views are immutable).
    """


class ExecStartError(ExecError):
    """Raised when the command could not be started (missing cwd, shell not found, ...)."""


class SpillError(ExecError):
    """Raised when the spill file cannot be created or written.

    The process group was killed and the latest bounded state published before this
    is raised; ``path`` is the spill directory or file concerned.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class CallbackError(ExecError):
    """Raised when the update consumer raised (the ``callback_error`` failure).

    The publisher had already committed its baseline, so the failed update is never
    delivered twice; the process group was killed. ``__cause__`` is the consumer's error.
    """


class TransportError(ExecError):
    """Raised by ``RemoteExecEnv`` when the exec host cannot be reached or the connection
    to it drops (also mid-command: the updates delivered so far are the partial output,
    and the remote processes were killed when the exec host's input closed).

    A host without toolfold gets one of these too, saying how to install it there.
    ``partial`` is the view folded from the updates received before a mid-command
    drop (``None`` when none arrived or the error is not about a command).
    """

    partial: ShellOutputView | None = None


class ProtocolError(TransportError):
    """Raised when the exec host speaks another protocol version (the message names
    both) or sends a message this side cannot read."""


class BackgroundLimitError(ExecError):
    """Raised by ``exec(..., yield_after=...)`` when the environment already runs its
    ``max_background`` commands; the message names them and says to stop one."""


class HandleError(ExecError):
    """Raised for a background handle the environment does not know (or no longer: the
    read that reported its end forgot it), or input or a signal to a command that ended."""
