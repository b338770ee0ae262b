"""The spill file: the exact raw stream of one command, written behind a bounded buffer."""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path

from ._errors import SpillError

_MAX_IOV = 512  # well under IOV_MAX (1024 on Linux)


def _write_all(fd: int, chunks: list[bytes]) -> None:
    # writev hands the queued reads to the kernel as they are: no join copy in Python.
    views = [memoryview(c) for c in chunks if c]
    while views:
        written = os.writev(fd, views[:_MAX_IOV])
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if written:
            views[0] = views[0][written:]


def spill_file_name() -> str:
    """A file name unique per exec: ``exec-<UTC timestamp>-<pid>-<random>.log``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"exec-{stamp}-{os.getpid()}-{secrets.token_hex(6)}.log"


class SpillFile:
    """Appends raw chunks to a file in ``directory`` through a bounded write buffer.

    ``open(prefix)`` creates the file synchronously (so its path can be published at
    once) and queues the retained raw prefix; ``write(data)`` queues later chunks in
    arrival order. Writes run in a worker thread. When more than ``high_water`` bytes
    are queued, ``on_pause()`` is called (the caller stops reading its pipes);
    ``on_resume()`` follows once the queue drained to half of it. A write failure is
    reported once through ``on_error`` and by ``close()``.
    """

    def __init__(
        self,
        directory: Path,
        *,
        high_water: int,
        on_pause: Callable[[], None] | None = None,
        on_resume: Callable[[], None] | None = None,
        on_error: Callable[[SpillError], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.path: Path | None = None
        self._high_water = high_water
        self._on_pause = on_pause
        self._on_resume = on_resume
        self._on_error = on_error
        self._fd: int | None = None
        self._pending: list[bytes] = []
        self._buffered = 0
        self._paused = False
        self._task: asyncio.Task[None] | None = None
        self._error: SpillError | None = None
        self.bytes_written = 0

    @property
    def error(self) -> SpillError | None:
        """The first failure, if any."""
        return self._error

    @property
    def buffered(self) -> int:
        """Bytes queued and not yet written."""
        return self._buffered

    def open(self, prefix: bytes) -> Path:
        """Create the directory (if needed) and a new file in it; queue ``prefix``.

        Raises ``SpillError`` naming the path when either cannot be created.
        """
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpillError(
                f"cannot create spill directory {str(self.directory)!r}: {exc.strerror or exc}; "
                "give LocalExecEnv a writable directory it owns",
                str(self.directory),
            ) from exc
        path = self.directory / spill_file_name()
        try:
            self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise SpillError(
                f"cannot create spill file {str(path)!r}: {exc.strerror or exc}; "
                "give LocalExecEnv a writable directory it owns",
                str(path),
            ) from exc
        self.path = path
        self.write(prefix)
        return path

    def write(self, data: bytes) -> None:
        """Queue ``data`` after everything queued before."""
        if self._error is not None or not data:
            return
        self._pending.append(data)
        self._buffered += len(data)
        if self._buffered > self._high_water and not self._paused:
            self._paused = True
            if self._on_pause is not None:
                self._on_pause()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._pending and self._error is None:
                batch, self._pending = self._pending, []
                size = sum(len(c) for c in batch)
                fd = self._fd
                if fd is None:  # pragma: no cover - write() is only reachable after open()
                    return
                try:
                    await loop.run_in_executor(None, _write_all, fd, batch)
                except OSError as exc:
                    self._fail(
                        SpillError(
                            f"writing spill file {str(self.path)!r} failed after "
                            f"{self.bytes_written} bytes: {exc.strerror or exc}; "
                            "free space or choose another spill directory",
                            str(self.path),
                        ),
                        exc,
                    )
                    return
                self.bytes_written += size
                self._buffered -= size
                if self._paused and self._buffered <= self._high_water // 2:
                    self._paused = False
                    if self._on_resume is not None:
                        self._on_resume()
        finally:
            self._task = None

    def _fail(self, error: SpillError, cause: BaseException) -> None:
        error.__cause__ = cause
        self._error = error
        self._pending.clear()
        self._buffered = 0
        if self._paused:
            # Nothing more will be written; let the pipes drain so the killed child can exit.
            self._paused = False
            if self._on_resume is not None:
                self._on_resume()
        if self._on_error is not None:
            self._on_error(error)

    async def close(self) -> None:
        """Wait until everything queued is written, then close the file.

        Raises the recorded ``SpillError`` if a write failed.
        """
        while self._task is not None:
            await asyncio.shield(self._task)
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if self._error is not None:
            raise self._error
