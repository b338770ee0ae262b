"""A small tmpfs for disk-full tests: a real file system that really runs out of space.

Mounting needs root (the test machines run the suite as root). Where mounting is
impossible the test fails with this module's message: a disk-full test that silently
skips proves nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """Mount a tmpfs of ``size`` on ``where`` (created) for the block; unmount after."""
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"cannot mount a {size} tmpfs on {where} ({done.stderr.strip() or done.returncode}); "
            "the disk-full tests need root (or CAP_SYS_ADMIN) to mount one — run the suite "
            "as root, as CI does"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False, capture_output=True)


def fill(directory: Path, name: str = "filler") -> Path:
    """Write zeros into ``directory/name`` until the file system is full (0 bytes free)."""
    path = directory / name
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, 4096, 1):  # big steps first, then whatever is left
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    st = os.statvfs(directory)
    assert st.f_bavail == 0, f"{directory} still has {st.f_bavail * st.f_frsize} bytes free"
    return path
