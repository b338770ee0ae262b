"""How a ``RemoteExecEnv`` reaches its exec host: a local process whose stdin/stdout
are the host's (``ssh host toolfold exec-host``, ``docker exec -i c toolfold exec-host``).

SSH uses the system ``ssh`` binary rather than a Python SSH library: it already
honours the user's ``~/.ssh/config``, agent, known hosts, ``ProxyJump`` and
``ControlMaster``, adds no dependency, and killing it (or its parent dying, which
closes its stdin) closes the channel, which is what tells the exec host to kill its
commands.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from ._errors import ExecConfigError

DEFAULT_REMOTE_COMMAND = "toolfold exec-host"
"""What the transport runs on the other side; give an absolute path when ``toolfold``
is not on the PATH of a non-interactive shell there (a venv, ``pipx``)."""


class Transport:
    """Something that starts a process speaking the exec-host protocol on its stdin/stdout."""

    def argv(self) -> list[str]:
        """The local command line to start."""
        raise NotImplementedError

    def describe(self) -> str:
        """A short name for messages (``ssh user@host``)."""
        raise NotImplementedError

    def install_hint(self) -> str:
        """How to get ``toolfold exec-host`` onto the other side."""
        raise NotImplementedError


def _split(value: str | Sequence[str], what: str) -> list[str]:
    words = shlex.split(value) if isinstance(value, str) else [str(w) for w in value]
    if not words:
        raise ExecConfigError(f"{what} must name a command, got {value!r}")
    return words


@dataclass(frozen=True)
class SSHTransport(Transport):
    """``ssh [options] destination -- remote_command``, with the system ``ssh``.

    ``destination`` is what ``ssh`` takes (``user@host``, a ``Host`` alias from the
    ssh config). ``options`` are extra ``ssh`` arguments (``["-p", "2222", "-i",
    key]``). ``BatchMode=yes`` is always set: there is no terminal to ask a password
    or a host-key question on, and a hanging prompt would look like a hanging command.
    """

    destination: str
    options: Sequence[str] = field(default_factory=tuple)
    remote_command: str = DEFAULT_REMOTE_COMMAND
    ssh: str = "ssh"

    def __post_init__(self) -> None:
        if not self.destination or self.destination.startswith("-"):
            raise ExecConfigError(
                f"SSH destination must be user@host or a host alias, got {self.destination!r}"
            )

    def argv(self) -> list[str]:
        # -T: no pseudo-terminal (it would mangle the byte stream and echo input).
        return [
            self.ssh,
            "-T",
            "-o",
            "BatchMode=yes",
            *self.options,
            self.destination,
            "--",
            self.remote_command,
        ]

    def describe(self) -> str:
        return f"ssh {self.destination}"

    def install_hint(self) -> str:
        return (
            f"install it there (`ssh {self.destination} python3 -m pip install --user toolfold`, "
            "or pipx install toolfold) and make sure `toolfold` is on the PATH of a "
            "non-interactive ssh session, or give the full path of the remote command "
            "(--remote-command '/path/to/venv/bin/toolfold exec-host')"
        )


@dataclass(frozen=True)
class CommandTransport(Transport):
    """A command prefix that runs ``remote_command`` somewhere else with stdin/stdout
    attached: ``docker exec -i CONTAINER``, ``podman exec -i CONTAINER``,
    ``kubectl exec -i POD --``. The ``-i`` matters: without it stdin is not connected
    and the host sees it closed at once."""

    prefix: str | Sequence[str]
    remote_command: str = DEFAULT_REMOTE_COMMAND

    def argv(self) -> list[str]:
        return [*_split(self.prefix, "the exec-host prefix"), *shlex.split(self.remote_command)]

    def describe(self) -> str:
        words = _split(self.prefix, "the exec-host prefix")
        return shlex.join(words)

    def install_hint(self) -> str:
        return (
            f"install it in that environment (`{self.describe()} python3 -m pip install toolfold`, "
            "or add it to the image) and make sure `toolfold` is on its PATH, or give the full "
            "path of the remote command"
        )
