"""What an exec host started dies with it, even when the host itself gets ``SIGKILL``.

A closed stdin, SIGHUP or SIGTERM end ``toolfold exec-host`` through its teardown, which
kills every command it runs. ``kill -9`` of the host runs no teardown: its commands (in
their own sessions, see ``_local``) would live on, re-parented to init. So the host starts
one small guard process next to it, on its first command:

- every command the host starts carries ``TOOLFOLD_EXEC_HOST=<random mark>`` in its
  environment (which every descendant inherits, ``setsid`` or not);
- the guard holds the read end of a pipe whose only write end the host holds
  (close-on-exec, so no command inherits it). The guard blocks on it; nothing else runs
  in it, so it costs no CPU while the host lives;
- when the host ends normally it writes ``q`` first, and the guard exits doing nothing
  (what commands left running on purpose, a daemon with its output redirected, stays, as
  for a local run);
- when the pipe closes without ``q`` — the host died, whatever killed it — the guard
  sends ``SIGKILL`` to every process whose environment holds the mark, again until none
  is left (a process that forked meanwhile is found in the next round), and exits.

Why a process and not ``PR_SET_PDEATHSIG``: the death signal reaches only the direct child
(the shell), never what the shell started, and setting it needs a ``preexec_fn``, which
makes every spawn a full ``fork``. The guard runs in its own session, so signals sent to
the host's process group do not reach it. A sandboxed command needs none of this (bwrap's
``--die-with-parent`` takes its PID namespace down), but carries the mark too.

This file is also the guard's program: ``python -I -S _hostguard.py MARK`` (standard
library only, no toolfold import, so it starts in a few milliseconds).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

HOST_MARK_VAR = "TOOLFOLD_EXEC_HOST"
"""The environment variable that marks every process an exec host started."""

_QUIT = b"q"
_ROUNDS = 50


def _marked(marker: bytes, me: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue  # gone, a zombie, or not ours to read
    return found


def kill_marked(mark: str, var: str = HOST_MARK_VAR) -> int:
    """SIGKILL every process (but this one) whose environment holds ``var=mark``, round
    after round until none is left; how many were hit. Used by the guard, and by
    ``toolfold stop`` for a detached run whose process does not end."""
    marker = f"{var}={mark}".encode()
    me = os.getpid()
    hit: set[int] = set()
    for _ in range(_ROUNDS):
        pids = _marked(marker, me)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        hit.update(pids)
    return len(hit)


class HostGuard:
    """The host's side: the mark its commands carry, and the pipe to the guard."""

    def __init__(self) -> None:
        self.mark = os.urandom(8).hex()
        self._pipe: int | None = None
        self._pid: int | None = None

    def start(self) -> None:
        """Start the guard (once; best effort: a host that cannot start it still runs
        commands, as before the guard existed)."""
        if self._pid is not None or not sys.platform.startswith("linux"):
            return
        read_end, write_end = os.pipe()  # both close-on-exec
        try:
            # posix_spawn, not Popen: nothing to wait for at the end (see close), and no
            # fork of a process that has threads. The guard's stdin is the pipe; its
            # stdout and stderr are not the host's (over ssh those are the channel, which
            # must not stay open once the host is gone).
            self._pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-I", "-S", os.path.abspath(__file__), self.mark],
                {},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read_end, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,
            )
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        self._pipe = write_end

    def child_env(self, env: dict[str, str] | None) -> dict[str, str]:
        """The environment of a command: ``env`` (None: this process's) plus the mark."""
        out = dict(os.environ if env is None else env)
        out[HOST_MARK_VAR] = self.mark
        return out

    def close(self) -> None:
        """The host ends normally: tell the guard to leave. Not waited for (it may still
        be starting); reaped here if it already left, else by init once the host exits."""
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._pipe, _QUIT)
            os.close(self._pipe)
            self._pipe = None
        if self._pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, os.WNOHANG)
            self._pid = None


def _guard(mark: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    while True:
        try:
            data = os.read(0, 64)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        except OSError:
            data = b""
        if _QUIT in data:
            return 0
        if not data:
            break
    kill_marked(mark)
    return 0


if __name__ == "__main__":
    sys.exit(_guard(sys.argv[1]))
