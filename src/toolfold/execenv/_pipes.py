"""A command's stdout and stderr pipes, read on the event loop into a capture session.

``LocalExecEnv`` creates the pipes itself instead of letting asyncio's subprocess
transports read them: before each read the reader offers the pipe to the session's
spill (``CaptureSession.tee``), so past the cap the kernel copies the output into the
spill file and Python reads every byte once, for the view and the totals.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio


class PipeConsumer(Protocol):
    """Where the reader puts what it reads (a ``CaptureSession``). A protocol, not an
    import: the session imports the spill, which makes its pipe here."""

    def tee(self, pipe_fd: int, size: int) -> int: ...
    def feed(self, data: bytes, *, spilled: int = 0) -> None: ...


_F_SETPIPE_SZ = 1031  # Linux fcntl: resize a pipe's kernel buffer
READ_SIZE = 1 << 20
"""Pipe buffer and read size: a 64 KiB pipe caps every read at 64 KiB, and the Python
overhead is per read."""
_SMALL_READ = READ_SIZE // 4
_GATHER = 0.001
"""After a read of less than ``_SMALL_READ``, that pipe is looked at again ``_GATHER``
seconds later rather than at its next byte: a reader as fast as its producer otherwise
reads every small write on its own, each read with its loop turn and spill hand-off,
which takes CPU the producer needs (``benchmarks/bench_capture_floor.py``). A
millisecond is far below the publisher's pacing (100 ms) and fills at most the pipe."""


def wide_pipe(size: int = READ_SIZE) -> tuple[int, int]:
    """A close-on-exec (read end, write end) pair whose kernel buffer holds ``size`` bytes
    where Linux allows it (else the default 64 KiB)."""
    r, w = os.pipe2(os.O_CLOEXEC)
    with contextlib.suppress(OSError):
        fcntl.fcntl(r, _F_SETPIPE_SZ, size)
    return r, w


def output_pipe() -> tuple[int, int]:
    """A (read end, write end) pair for a child's stdout or stderr; the read end is
    non-blocking and both are close-on-exec (the child gets a duplicate as fd 1 or 2)."""
    r, w = wide_pipe()
    os.set_blocking(r, False)
    return r, w


class PipeReader:
    """Reads the read ends ``fds`` whenever they are readable and feeds ``session``.

    Reads are fed in the order the loop sees them (stdout and stderr interleaved as
    they arrive); a pipe that had little to read waits ``_GATHER`` before its next read. ``on_closed()`` is called once every pipe reached end of file (no
    process holds a write end any more). ``pause``/``resume`` stop and restart reading
    (the spill's backpressure); ``close`` closes whatever is still open.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fds: list[int],
        session: PipeConsumer,
        on_closed: Callable[[], None],
    ) -> None:
        self._loop = loop
        self._open = list(fds)
        self._session = session
        self._on_closed = on_closed
        self._reading = False
        self._paused = False
        self._gathering: set[int] = set()  # read ends waiting out _GATHER
        self._last = -1  # the pipe of the latest read that returned bytes

    def start(self) -> None:
        self._reading = True
        if not self._paused:
            self._add_readers()

    def pause(self) -> None:
        if not self._paused:
            self._paused = True
            if self._reading:
                for fd in self._open:
                    self._loop.remove_reader(fd)

    def resume(self) -> None:
        if self._paused:
            self._paused = False
            self._gathering.clear()  # every open pipe is watched again
            if self._reading:
                self._add_readers()

    def _add_readers(self) -> None:
        for fd in self._open:
            self._loop.add_reader(fd, self._ready, fd)

    def _ready(self, fd: int) -> None:
        # What a gathering pipe holds arrived before what just woke us on this one:
        # read it first (without tee: it is little, and an empty pipe must not look like
        # a full spill pipe), so that stdout and stderr stay in arrival order.
        for other in list(self._gathering):
            if other != fd:
                self._gathering.discard(other)
                if self._read(other, tee=False) is not None and not self._paused:
                    self._loop.add_reader(other, self._ready, other)
        if fd not in self._open:  # pragma: no cover - only _read closes, and not this one
            return
        previous = self._last
        size = self._read(fd)
        # Gather only a pipe that is read on its own: while both carry output, every
        # read happens at once, as it arrives (their interleaving is the output's).
        if size is not None and size < _SMALL_READ and previous == fd and not self._paused:
            self._loop.remove_reader(fd)
            self._gathering.add(fd)
            self._loop.call_later(_GATHER, self._gathered, fd)

    def _read(self, fd: int, *, tee: bool = True) -> int | None:
        """Read once from ``fd`` into the session; bytes read, None at end of file."""
        session = self._session
        teed = session.tee(fd, READ_SIZE) if tee else 0
        try:
            data = os.read(fd, teed or READ_SIZE)
            while len(data) < teed:  # pragma: no cover - a pipe read returns what is there
                data += os.read(fd, teed - len(data))
        except (BlockingIOError, InterruptedError):
            return 0  # nothing there after all (teed is 0: tee found it empty too)
        except OSError:
            data = b""  # as asyncio's pipe transport: a failing pipe is a closed one
        if data:
            self._last = fd
            session.feed(data, spilled=teed)
            return len(data)
        self._close_fd(fd)
        if not self._open:
            self._on_closed()
        return None

    def drain(self, max_reads: int = 64) -> None:
        """Read now what the pipes already hold (at most ``max_reads`` reads each), so a
        caller looking at the output sees everything written before it looked. Nothing
        is read while paused (the spill is behind)."""
        for fd in list(self._open):
            for _ in range(max_reads):
                if self._paused or fd not in self._open:
                    break
                # Without tee: an empty pipe must not look like a full spill pipe.
                if not self._read(fd, tee=False):
                    break

    def _gathered(self, fd: int) -> None:
        if fd in self._gathering:
            self._gathering.discard(fd)
            if not self._paused:
                self._loop.add_reader(fd, self._ready, fd)

    def _close_fd(self, fd: int) -> None:
        self._open.remove(fd)
        self._gathering.discard(fd)
        if self._reading and not self._paused:
            self._loop.remove_reader(fd)
        os.close(fd)

    def close(self) -> None:
        """Stop reading and close every pipe still open (a writer still holding one
        then gets EPIPE)."""
        for fd in list(self._open):
            self._close_fd(fd)
