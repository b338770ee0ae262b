"""The plumbing of a local child process: the shell it runs, its stdin/stdout/stderr ends,
and whether it exited. No event loop here: the asyncio protocol that watches it exit is
``_child_protocol``'s, so a run without asyncio starts its child with the same pieces."""

from __future__ import annotations

import contextlib
import os
import subprocess

from ._pipes import output_pipe


def default_shell() -> str:
    """``bash`` on ``PATH`` (as ``shutil.which`` finds it), else ``/bin/sh``. Looked up
    here rather than through ``shutil``, whose import (with its compression modules)
    every ``toolfold run`` would pay for one lookup."""
    for directory in os.get_exec_path():
        path = os.path.join(directory, "bash")
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return "/bin/sh"


def has_exited(pid: int) -> bool:
    """True when our child ``pid`` has exited, without reaping it.

    asyncio learns of the exit from its child watcher a moment later; ``WNOWAIT``
    leaves the status for the watcher to collect. ECHILD means it was reaped already.
    """
    if not hasattr(os, "waitid"):  # pragma: no cover - not on Linux
        return False
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


class Streams:
    """The child's stdin, stdout and stderr, and our ends of them.

    Plain: two output pipes and stdin ``/dev/null`` (or a copy of ``given``, a
    descriptor the caller keeps), or a pipe we write when the command may take input
    (``writable``). ``tty``: one pseudo-terminal for all three.
    """

    def __init__(
        self,
        read_ends: list[int],
        child: tuple[int, int, int],
        stdin: int | None,
        tty: int | None,
    ) -> None:
        self.read_ends = read_ends
        self.child_stdin, self.child_stdout, self.child_stderr = child
        self.stdin = stdin
        self.tty = tty
        self._child_open = True

    @classmethod
    def open(cls, *, tty: bool, writable: bool, given: int | None = None) -> Streams:
        if tty:
            from ._pty import open_pty  # termios and friends only for a terminal

            master, slave = open_pty()
            # Our own descriptor for input: the reader closes the master at end of file,
            # and a write must never reach a number reused meanwhile.
            return cls([master], (slave, slave, slave), os.dup(master), master)
        opened: list[int] = []
        try:
            out_r, out_w = output_pipe()
            opened += (out_r, out_w)
            err_r, err_w = output_pipe()
            opened += (err_r, err_w)
            stdin: int | None = None
            child_in = subprocess.DEVNULL
            if writable:
                child_in, stdin = os.pipe2(os.O_CLOEXEC)
                opened += (child_in, stdin)
                os.set_blocking(stdin, False)
            elif given is not None:
                child_in = os.dup(given)  # closed with the other child ends
                opened.append(child_in)
        except OSError:
            for fd in opened:
                os.close(fd)
            raise
        return cls([out_r, err_r], (child_in, out_w, err_w), stdin, None)

    def close_child_ends(self) -> None:
        if self._child_open:
            self._child_open = False
            for fd in {self.child_stdin, self.child_stdout, self.child_stderr}:
                if fd >= 0:
                    os.close(fd)

    def close_stdin(self) -> None:
        if self.stdin is not None:
            fd, self.stdin = self.stdin, None
            with contextlib.suppress(OSError):
                os.close(fd)
