"""The spill file: the exact raw stream of one command, written behind a bounded buffer."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfold._fsperm import UnsafePathError, open_owned_dir
from toolfold._units import format_bytes

from ._errors import SpillError
from ._pipes import wide_pipe

if TYPE_CHECKING:
    import asyncio
    import queue

_MAX_IOV = 512  # well under IOV_MAX (1024 on Linux)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_FULL = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}
_MAX_RESERVE = 64 << 20


def free_space_reserve(fs_size: int) -> int:
    """Bytes a spill leaves free on its file system: a tenth of it, at most 64 MiB. The
    store usually shares the disk and must still be able to record the call."""
    return min(_MAX_RESERVE, fs_size // 10)


human_size = format_bytes
"""``1536`` -> ``"1.5 KiB"`` (the project's one byte formatter)."""


def open_spill_dir(directory: Path) -> int:
    """A descriptor of the spill directory, created (0700) with its parent if missing.

    The directory and its parent are toolfold's (for the CLI ``spill/<session>/`` and
    ``spill/``): neither may be a symbolic link, owned by another user or writable by
    one (toolfold._fsperm's rule, as for every file toolfold writes); otherwise anyone
    able to plant a link there (a store in a shared directory such as /tmp) would choose
    where a command's output is written. Files are then created relative to the
    descriptor, so nothing can be swapped in between. The directories above the parent
    are the user's path: created if missing, links on it followed, and judged by the rule.
    """
    try:
        return open_owned_dir(directory)
    except UnsafePathError as exc:
        raise SpillError(str(exc), exc.path) from exc


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


def _splice_all(src: int, fd: int, size: int) -> None:
    # Exactly ``size`` bytes are waiting in pipe ``src`` (teed before they were queued):
    # the kernel moves them into the file, Python never holds them.
    while size:
        try:
            moved = os.splice(src, fd, size)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            # A file system without splice support: copy them through Python instead.
            data = os.read(src, size)
            _write_all(fd, [data])
            moved = len(data)
        size -= moved


_TEE_PIPE_SIZE = 1 << 20
_SPLICE_F_NONBLOCK = 2


@functools.cache  # looked up once, when the first command spills
def _tee_function() -> Callable[[int, int, int, int], int] | None:
    """``tee(2)`` (Linux; the standard library has ``os.splice`` but no ``tee``)."""
    if sys.platform != "linux" or not hasattr(os, "splice"):
        return None
    try:
        import ctypes  # only once a command spills: ctypes costs start-up time

        libc = ctypes.CDLL(None, use_errno=True)
        tee = libc.tee
    except (OSError, AttributeError):
        return None
    tee.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]
    tee.restype = ctypes.c_ssize_t

    def call(src: int, dst: int, size: int, flags: int) -> int:
        n = int(tee(src, dst, size, flags))
        if n < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        return n

    return call


def spill_file_name() -> str:
    """A file name unique per exec: ``exec-<UTC timestamp>-<pid>-<random>.log``."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return f"exec-{stamp}-{os.getpid()}-{os.urandom(6).hex()}.log"


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
        on_full: Callable[[int], None] | None = None,
    ) -> None:
        self.directory = Path(directory)
        self._on_full = on_full
        #: Set when the disk filled up under the spill: nothing more is written.
        self.full = False
        self.path: Path | None = None
        self._high_water = high_water
        self._on_pause = on_pause
        self._on_resume = on_resume
        self._on_error = on_error
        self._fd: int | None = None
        # bytes: write them; int n: splice the next n bytes of the tee pipe. (Imported
        # here: a SpillFile exists once a command's output went past its window.)
        import queue

        self._queue: queue.SimpleQueue[bytes | int | None] = queue.SimpleQueue()
        self._tee_pipe: tuple[int, int] | None = None  # (read end, write end), lazily
        self._tee_off = False
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
        self._resume_below = high_water // 2
        self._error: SpillError | None = None

    @property
    def error(self) -> SpillError | None:
        """The first failure, if any."""
        return self._error

    @property
    def buffered(self) -> int:
        """Bytes queued and not yet written (0 after a failure: they never will be)."""
        return 0 if self._error is not None or self.full else self._queued - self._written

    @property
    def queued(self) -> int:
        """Bytes handed to ``write`` so far (the prefix included)."""
        return self._queued

    @property
    def bytes_written(self) -> int:
        """Bytes on disk so far."""
        return self._written

    def open(
        self, prefix: bytes, *, max_size: int | None = None
    ) -> tuple[Path | None, int, str | None]:
        """Create the directory (if needed) and a new file in it; queue ``prefix``.

        Checks free space first: the file may hold at most ``max_size`` bytes and must
        leave :func:`free_space_reserve` free. Returns ``(path, budget, note)``: the
        bytes it may hold, and why that is less than ``max_size`` (or why nothing was
        created: ``path`` None). Raises ``SpillError`` naming the path when the
        directory or file cannot be created, or the directory is not safe to use.
        """
        try:
            dir_fd = open_spill_dir(self.directory)
        except SpillError:
            raise
        except OSError as exc:
            raise SpillError(
                f"cannot create spill directory {str(self.directory)!r}: {exc.strerror or exc}; "
                "give LocalExecEnv a writable directory it owns",
                str(self.directory),
            ) from exc
        try:
            budget, note = self._budget(dir_fd, max_size)
            if budget <= 0:
                return None, 0, note
            name = spill_file_name()
            path = self.directory / name
            try:
                self._fd = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW,
                    0o600,
                    dir_fd=dir_fd,
                )
                os.fchmod(self._fd, 0o600)
            except OSError as exc:
                raise SpillError(
                    f"cannot create spill file {str(path)!r}: {exc.strerror or exc}; "
                    "give LocalExecEnv a writable directory it owns",
                    str(path),
                ) from exc
        finally:
            os.close(dir_fd)
        self.path = path
        self.write(prefix[:budget])
        return path, budget, note

    def _budget(self, dir_fd: int, max_size: int | None) -> tuple[int, str | None]:
        cap = max_size if max_size is not None else 1 << 62
        try:
            st = os.fstatvfs(dir_fd)
        except OSError:
            return cap, None
        free = st.f_bavail * st.f_frsize
        reserve = free_space_reserve(st.f_blocks * st.f_frsize)
        room = free - reserve
        if room >= cap:
            return cap, None
        if room <= 0:
            return 0, (
                f"not written: only {human_size(free)} free in {str(self.directory)!r}, "
                f"and a spill leaves {human_size(reserve)} free"
            )
        return room, (
            f"the first {human_size(room)} only: {human_size(free)} was free and a spill "
            f"leaves {human_size(reserve)} free"
        )

    def write(self, data: bytes) -> None:
        """Queue ``data`` after everything queued before."""
        if self._error is not None or self.full or self._closing or not data:
            return
        self._enqueue(data, len(data))

    def tee(self, pipe_fd: int, size: int) -> int:
        """Queue up to ``size`` bytes waiting in pipe ``pipe_fd`` without reading them.

        Returns how many were teed: the caller must then read exactly that many from
        ``pipe_fd`` (they are there) and not ``write`` them. 0 means nothing was teed
        (unavailable, our pipe is full, end of file): read and ``write`` as usual.
        """
        if self._error is not None or self.full or self._closing or self._tee_off:
            return 0
        tee = _tee_function()
        pipe = self._tee_pipe or (self._open_tee_pipe() if tee is not None else None)
        if tee is None or pipe is None:
            self._tee_off = True
            return 0
        try:
            n = tee(pipe_fd, pipe[1], size, _SPLICE_F_NONBLOCK)
        except BlockingIOError:
            # Our pipe is full (the writer is behind): stop reading until it drained.
            self._pause(_TEE_PIPE_SIZE // 2)
            return 0
        except OSError:
            # Not a pipe, tee refused (EINVAL, ENOSYS, EPERM, ...): nothing was teed,
            # so the caller's read and write lose nothing; copy from now on.
            self._tee_off = True
            return 0
        if n:
            self._enqueue(n, n)
        return n

    def _open_tee_pipe(self) -> tuple[int, int] | None:
        try:
            r, w = wide_pipe(_TEE_PIPE_SIZE)
        except OSError:
            return None
        os.set_blocking(w, False)
        self._tee_pipe = (r, w)
        return self._tee_pipe

    def _enqueue(self, item: bytes | int, size: int) -> None:
        if self._thread is None:
            self._start()
        self._queued += size
        self._queue.put(item)
        if self._queued - self._written > self._high_water:
            self._pause(self._high_water // 2)

    def _pause(self, resume_below: int) -> None:
        if not self._paused:
            self._paused = True
            if self._on_pause is not None:
                self._on_pause()
            self._arm_resume(resume_below)

    def _start(self) -> None:
        if self._loop is None:
            import asyncio

            self._loop = asyncio.get_running_loop()
        self._done = self._loop.create_future()
        self._thread = threading.Thread(target=self._writer, name="toolfold-spill", daemon=True)
        self._thread.start()

    def _arm_resume(self, resume_below: int) -> None:
        # Set the flag, then look: either the writer sees the flag after its next batch,
        # or its last batch was counted before this look and we resume right here.
        self._resume_below = resume_below
        self._want_resume = True
        if self._queued - self._written <= resume_below:
            self._want_resume = False
            self._resume()

    def _resume(self) -> None:
        if self._paused:
            self._paused = False
            if self._on_resume is not None:
                self._on_resume()

    def _writer_drained(self) -> None:
        if self._paused and self._error is None:
            self._arm_resume(self._resume_below)

    def _writer(self) -> None:
        import queue

        loop, fd = self._loop, self._fd
        if loop is None or fd is None:  # pragma: no cover - _start runs after open()
            return
        failed = False
        while True:
            batch: list[bytes | int] = []
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
                    self._write_batch(fd, batch)
                except OSError as exc:
                    failed = True
                    if exc.errno in _FULL and self._on_full is not None:
                        # A full disk ends the spill, not the command: what is on disk
                        # stays, and the metadata says how much that is.
                        size = self._written
                        with contextlib.suppress(OSError):
                            size = os.fstat(fd).st_size
                        loop.call_soon_threadsafe(self._disk_full, size)
                    else:
                        loop.call_soon_threadsafe(self._write_failed, exc, self._written)
                else:
                    if self._want_resume and (self._queued - self._written <= self._resume_below):
                        self._want_resume = False
                        loop.call_soon_threadsafe(self._writer_drained)
            if stop:
                # Queued after any failure report: the loop sees the error first.
                loop.call_soon_threadsafe(self._writer_done)
                return

    def _write_batch(self, fd: int, batch: list[bytes | int]) -> None:
        # Runs of queued bytes go out in one writev, runs of teed counts in one splice,
        # in queue order; _written moves after each so a failure reports what is on disk.
        start = 0
        while start < len(batch):
            end = start
            teed = isinstance(batch[start], int)
            while end < len(batch) and isinstance(batch[end], int) == teed:
                end += 1
            run = batch[start:end]
            if teed:
                size = sum(run)  # type: ignore[arg-type]
                if self._tee_pipe is None:  # pragma: no cover - tee() opened it
                    raise OSError(errno.EBADF, "no tee pipe")
                _splice_all(self._tee_pipe[0], fd, size)
            else:
                chunks: list[bytes] = run  # type: ignore[assignment]
                size = sum(len(c) for c in chunks)
                _write_all(fd, chunks)
            self._written += size
            start = end

    def _writer_done(self) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _disk_full(self, size: int) -> None:
        self.full = True
        self._resume()  # nothing more is written: let the pipes be read again
        if self._on_full is not None:
            self._on_full(size)

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

    def run_on(self, loop: Any) -> None:
        """Report to ``loop`` (a ``SelectorLoop``) rather than the running asyncio loop;
        close with :meth:`close_on`."""
        self._loop = loop

    def close_on(self, loop: Any) -> None:
        """:meth:`close` on a ``SelectorLoop``: its turns run until the writer is done."""
        if self._thread is not None and self._done is not None:
            self._stop_writer()
            while not self._done.done():
                loop.run_once(None)
        self._release()

    def _stop_writer(self) -> None:
        if not self._closing:
            self._closing = True
            self._queue.put(None)

    async def close(self) -> None:
        """Wait until everything queued is written, then close the file.

        Raises the recorded ``SpillError`` if a write failed.
        """
        if self._thread is not None and self._done is not None:
            self._stop_writer()
            import asyncio

            await asyncio.shield(self._done)
        self._release()

    def _release(self) -> None:
        self._closing = True
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
        if self._tee_pipe is not None:
            # Whatever a failed spill left in it is dropped with it.
            for end in self._tee_pipe:
                os.close(end)
            self._tee_pipe = None
        if self._error is not None:
            raise self._error
