"""One command running in the background: why it ended, what a read of it returns, the
state ``BackgroundCommands`` keeps for it, and writing to its input without blocking."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from typing import Literal, Protocol

from ._headtail import capture_for
from ._limits import ShellOutputLimits
from ._output_view import ShellOutputTruncation, ShellOutputView
from ._session import CaptureSession

Ended = Literal["exited", "signal", "stopped", "timeout", "idle", "closed"]
"""Why a command is no longer running: it exited; a signal ended it; or we stopped it
(``stop``, its ``timeout``, ``idle_timeout``, the environment closing)."""


class Process(Protocol):
    """A started command, as ``_local`` gives it to the registry."""

    pid: int
    exec_id: str
    """The command's ``TOOLFOLD_EXEC_ID`` marker (see ``_reaper``)."""
    session: CaptureSession
    stdin: int | None
    """Non-blocking fd writing to the command's stdin (a pipe or the pty master)."""
    tty: int | None
    """The pty master, when the command runs on a pseudo-terminal."""

    async def finished(self) -> bool:
        """Wait for the shell to exit; True when its output also closed (else leftovers
        still hold it, after the exit grace)."""
        ...

    async def teardown(self, kill: bool) -> ShellOutputView:
        """Kill the command's processes (``kill``) or reap what it left, close its pipes,
        finish its session; the final view."""
        ...

    def returncode(self) -> int | None:
        """The shell's exit status (negative: a signal), None while running."""
        ...

    def drain(self) -> None:
        """Read what its pipes already hold."""
        ...

    def send_signal(self, sig: signal.Signals) -> None:
        """Signal the command's processes (its process group; in a sandbox, the processes
        inside it, not bwrap)."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class BackgroundRead:
    """What a background command printed since the previous read, and its state.

    ``text`` is the bounded window (the command's limits and retain mode) of the raw
    bytes ``offset`` .. ``offset + truncation.total_bytes`` of its output; ``truncation``
    counts exactly those bytes and lines. ``total_bytes`` / ``total_lines`` count the
    whole output so far. ``spill_path`` holds the raw stream once the output went past
    the cap (so a truncated read can be read whole from it at ``offset``).
    ``exit_code`` is set once it exited by itself; ``ended`` says why it is no longer
    running. ``written``: bytes given to its stdin by this call.
    """

    handle: str
    command: str
    running: bool
    text: str
    truncation: ShellOutputTruncation
    offset: int
    total_bytes: int
    total_lines: int
    spill_path: str | None = None
    spill_note: str | None = None
    exit_code: int | None = None
    ended: Ended | None = None
    written: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BackgroundInfo:
    """One command of ``commands()``."""

    handle: str
    command: str
    pid: int
    running: bool
    tty: bool
    started: float
    """Wall-clock time (``time.time()``) it was started."""
    total_bytes: int
    unread_bytes: int
    idle: float
    """Seconds since the last read, write or signal."""
    exit_code: int | None = None
    ended: Ended | None = None


class Entry:
    def __init__(
        self,
        handle: str,
        command: str,
        proc: Process,
        limits: ShellOutputLimits,
        started: float,
    ) -> None:
        self.handle = handle
        self.command = command
        self.proc = proc
        self.limits = limits
        self.started = started
        self.segment = capture_for(limits)
        self.offset = proc.session.capture.total_bytes
        self.changed = asyncio.Event()
        self.done = asyncio.Event()
        self.stop_reason: Ended | None = None
        self.stop_requested = asyncio.Event()
        self.ended: Ended | None = None
        self.exit_code: int | None = None
        self.last_touch = time.monotonic()
        self.watcher: asyncio.Task[None] | None = None
        self.idle_timer: asyncio.TimerHandle | None = None
        self.waiters = 0
        self.tag: str | None = None

    def feed(self, data: bytes) -> None:
        self.segment.feed(data)
        self.changed.set()

    @property
    def running(self) -> bool:
        return not self.done.is_set()

    def take(self, written: int | None = None) -> BackgroundRead:
        """The new output since the last take, and restart the segment."""
        if not self.running:
            self.segment.close()
        snap = self.segment.snapshot()
        session = self.proc.session
        capture = session.capture
        meta = session.view().metadata
        read = BackgroundRead(
            handle=self.handle,
            command=self.command,
            running=self.running,
            text=snap.text,
            truncation=snap.truncation,
            offset=self.offset,
            total_bytes=capture.total_bytes,
            total_lines=capture.total_lines,
            spill_path=meta.spill_path,
            spill_note=meta.spill_note,
            exit_code=self.exit_code,
            ended=self.ended,
            written=written,
        )
        self.offset = capture.total_bytes
        self.segment = capture_for(self.limits)
        return read


def set_ready(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def write_all(fd: int, data: bytes, deadline: float) -> int:
    """Write ``data`` to non-blocking ``fd`` as the reader takes it, until ``deadline``;
    how many bytes went."""
    loop = asyncio.get_running_loop()
    done = 0
    while done < len(data):
        try:
            done += os.write(fd, data[done:])
            continue
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EIO, errno.EBADF):
                break  # the command closed its input, or exited
            raise
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        ready: asyncio.Future[None] = loop.create_future()
        loop.add_writer(fd, set_ready, ready)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready, remaining)
        finally:
            loop.remove_writer(fd)
    return done
