"""A pseudo-terminal for commands that need one (``exec(..., tty=True)``).

The command gets the pty's slave side as stdin, stdout and stderr, and it as its
controlling terminal, so ``isatty`` is true, ``read -p`` prompts, ``python -i`` and
progress bars behave as they do for a person, and Ctrl-C (``\\x03`` written to it)
reaches the foreground process group. toolfold keeps the master side: the capture reads
it (the same pipeline as a pipe: the spill keeps the raw bytes, escape sequences are
cleaned and ``\\r`` redraws folded for the view), and stdin writes go to it.
"""

from __future__ import annotations

import fcntl
import os
import struct
import termios

from ._errors import ExecConfigError

DEFAULT_COLUMNS = 120
DEFAULT_ROWS = 40
"""A terminal a little wider than 80 columns, so tables and progress bars are not wrapped
into many lines, and tall enough for a pager's screen."""


def _check_size(columns: int, rows: int) -> None:
    for name, value in (("columns", columns), ("rows", rows)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1000:
            raise ExecConfigError(f"terminal {name} must be an int from 1 to 1000, got {value!r}")


def set_window_size(fd: int, columns: int, rows: int) -> None:
    """Set the terminal's size (``TIOCSWINSZ``); the kernel sends ``SIGWINCH`` to its
    foreground process group."""
    _check_size(columns, rows)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def window_size(fd: int) -> tuple[int, int]:
    """``(columns, rows)`` of the terminal ``fd``."""
    rows, columns, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, bytes(8)))
    return columns, rows


def open_pty(columns: int = DEFAULT_COLUMNS, rows: int = DEFAULT_ROWS) -> tuple[int, int]:
    """A new pseudo-terminal of the given size: ``(master, slave)``, both close-on-exec,
    the master non-blocking."""
    _check_size(columns, rows)
    master, slave = os.openpty()
    try:
        os.set_inheritable(master, False)
        os.set_inheritable(slave, False)
        os.set_blocking(master, False)
        set_window_size(master, columns, rows)
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    return master, slave


def take_controlling_terminal() -> None:
    """In the child, after ``setsid`` (``start_new_session``) and before exec: make its
    stdin, the pty slave, the controlling terminal of its new session."""
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
