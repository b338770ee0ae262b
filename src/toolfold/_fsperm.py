"""Private files and directories: whatever holds commands and their output is 0600 / 0700.

Used by storage (store files), execenv (spill files) and the CLI (store directories);
it imports nothing else from toolfold, so every layer may use it. Modes are set with
``chmod`` after creation, so the result does not depend on the process umask.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "create_private_file", "make_private_dirs"]

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def make_private_dirs(path: str | os.PathLike[str]) -> None:
    """Create ``path`` and its missing parents, each 0700. Directories that already
    exist are left as they are (the user chose them). Raises ``OSError``."""
    missing: list[Path] = []
    p = Path(path)
    while not os.path.lexists(p):
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, PRIVATE_DIR)
        except FileExistsError:
            continue  # created meanwhile by someone else: not ours to change
        # mkdir applied the umask (never wider than 0700); chmod makes it exactly 0700.
        os.chmod(d, PRIVATE_DIR)


def create_private_file(path: str | os.PathLike[str]) -> bool:
    """Create ``path`` empty with mode 0600 unless it exists (a symlink counts as existing
    and is not followed). Returns whether it was created. Raises ``OSError``."""
    try:
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, PRIVATE_FILE
        )
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return True
