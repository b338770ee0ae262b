"""The spill file: the exact raw stream of one command, written behind a bounded buffer."""

from __future__ import annotations

import asyncio
import os
import queue
import secrets
import threading
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
    arrival order. One dedicated writer thread per file drains the queue with
    ``writev`` (no join copies, no executor round trip per batch, and no event-loop
    wake-up per batch: the thread only calls back into the loop to resume reading, to
    report a failure and when it is done). When more than ``high_water`` bytes are
    queued, ``on_pause()`` is called (the caller stops reading its pipes);
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
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Future[None] | None = None
        self._closing = False
        # _queued is only written by the loop thread, _written only by the writer thread
        # (int stores are atomic under the GIL); buffered = _queued - _written.
        self._queued = 0
        self._written = 0
        self._paused = False
        self._want_resume = False  # the writer calls back once the queue is down to half
        self._error: SpillError | None = None

    @property
    def error(self) -> SpillError | None:
        """The first failure, if any."""
        return self._error

    @property
    def buffered(self) -> int:
        """Bytes queued and not yet written (0 after a failure: they never will be)."""
        return 0 if self._error is not None else self._queued - self._written

    @property
    def bytes_written(self) -> int:
        """Bytes on disk so far."""
        return self._written

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
        if self._error is not None or self._closing or not data:
            return
        if self._thread is None:
            self._start()
        self._queued += len(data)
        self._queue.put(data)
        if not self._paused and self._queued - self._written > self._high_water:
            self._paused = True
            if self._on_pause is not None:
                self._on_pause()
            self._arm_resume()

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._done = self._loop.create_future()
        self._thread = threading.Thread(target=self._writer, name="toolfold-spill", daemon=True)
        self._thread.start()

    def _arm_resume(self) -> None:
        # Set the flag, then look: either the writer sees the flag after its next batch,
        # or its last batch was counted before this look and we resume right here.
        self._want_resume = True
        if self._queued - self._written <= self._high_water // 2:
            self._want_resume = False
            self._resume()

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._on_resume is not None:
                self._on_resume()

    def _writer_drained(self) -> None:
        if self._paused and self._error is None:
            self._arm_resume()

    def _writer(self) -> None:
        loop, fd = self._loop, self._fd
        if loop is None or fd is None:  # pragma: no cover - _start runs after open()
            return
        failed = False
        while True:
            batch: list[bytes] = []
            item = self._queue.get()
            while item is not None:
                batch.append(item)
                if len(batch) >= _MAX_IOV:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            stop = item is None
            if batch and not failed:
                try:
                    _write_all(fd, batch)
                except OSError as exc:
                    failed = True
                    loop.call_soon_threadsafe(self._write_failed, exc, self._written)
                else:
                    self._written += sum(len(c) for c in batch)
                    if self._want_resume and (
                        self._queued - self._written <= self._high_water // 2
                    ):
                        self._want_resume = False
                        loop.call_soon_threadsafe(self._writer_drained)
            if stop:
                # Queued after any failure report: the loop sees the error first.
                loop.call_soon_threadsafe(self._writer_done)
                return

    def _writer_done(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _write_failed(self, exc: OSError, written: int) -> None:
        self._fail(
            SpillError(
                f"writing spill file {str(self.path)!r} failed after "
                f"{written} bytes: {exc.strerror or exc}; "
                "free space or choose another spill directory",
                str(self.path),
            ),
            exc,
        )

    def _fail(self, error: SpillError, cause: BaseException) -> None:
        error.__cause__ = cause
        self._error = error
        # Nothing more will be written; let the pipes drain so the killed child can exit.
        self._resume()
        if self._on_error is not None:
            self._on_error(error)

    async def close(self) -> None:
        """Wait until everything queued is written, then close the file.

        Raises the recorded ``SpillError`` if a write failed.
        """
        if self._thread is not None and self._done is not None:
            if not self._closing:
                self._closing = True
                self._queue.put(None)
            await asyncio.shield(self._done)
        self._closing = True
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if self._error is not None:
            raise self._error
