"""The CLI's one exception hierarchy: every error a user can cause ends as one line and exit 2."""

from __future__ import annotations


class CliError(Exception):
    """Root of every error the ``toolfold`` command reports to its user.

    The message is one line naming the bad value, where it came from, and what to do
    next; ``main`` prints it as ``toolfold: error: <message>`` and exits with
    :attr:`exit_code` (2), never with a traceback.
    """

    exit_code = 2


class StoreURLError(CliError):
    """A store URL (``--store`` or ``TOOLFOLD_STORE``) with an unknown scheme or no path."""


class StoreOpenError(CliError):
    """The store cannot be opened or read: unreadable, corrupt (file and record named)."""


class StoreWriteError(CliError):
    """The store refused a write while ``run`` was recording a call (a full disk): the
    call is left unsettled with its last checkpoint, for ``toolfold resume``."""


class UnknownSessionError(CliError):
    """A session name that the store does not hold."""


class UnknownCallError(CliError):
    """A call (id, id prefix or list number) that the session does not hold."""


class InvalidLimitError(CliError):
    """An output limit (``--max-bytes``, ``--max-lines``, ``--retain``) out of range."""


class RemoteOptionError(CliError):
    """``--ssh`` / ``--exec-host`` options that do not fit together, or an exec host that
    cannot be reached (not installed there, another protocol version, ssh failing)."""
