"""Commands that outlive the call that started them: handles, reads of new output, stdin.

``exec(..., yield_after=s)`` hands a command still running after ``s`` seconds to the
environment's ``BackgroundCommands``: the process keeps running in its own process
group, its output keeps going through the same ``CaptureSession`` (bounded view, exact
totals, byte-exact spill, paced updates), and the caller gets a handle. With the
handle it can

- ``read`` what is new since the last read: a second ``OutputCapture`` is fed the same
  raw reads and restarted at each read, so a read is the bounded window of exactly the
  bytes since the previous one, with their exact totals and the offset where they start
  in the raw stream (and the spill file). Nothing is lost between two reads and nothing
  is held beyond two windows;
- ``write`` to its stdin (a pipe, or the pseudo-terminal), then wait a short yield;
- ``signal`` it, ``stop`` it (the same teardown as a timeout), ``resize`` its terminal;
- list the ``commands()`` of this environment.

Limits: ``max_running`` commands per environment (a start beyond it is refused with
``BackgroundLimitError``), the per-command spill cap of ``CaptureOptions``, and
``idle_timeout``: a command nobody read, wrote or signalled for that long is stopped.
``aclose()`` stops every command still running and returns what it stopped.

This module knows nothing of how a process is started: ``_local`` gives it a
``Process`` (the running shell, its capture session, its stdin).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ._background_entry import BackgroundInfo, BackgroundRead, Ended, Entry, Process, write_all
from ._errors import BackgroundLimitError, ExecConfigError, ExecError, HandleError
from ._ledger import start_time, write_ledger
from ._limits import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_RUNNING,
    ShellOutputLimits,
    check_background_limits,
)
from ._session import UpdateConsumer
from ._updates import Replace

MAX_WRITE = 64 * 1024
"""Bytes one ``write`` may send: input is typed, not streamed."""
SIGNALS = ("INT", "TERM", "HUP", "QUIT", "KILL", "USR1", "USR2", "CONT", "STOP", "WINCH")
"""Signals ``signal`` sends (by name, without ``SIG``)."""


class BackgroundCommands:
    """The commands of one environment that outlived their call (see the module doc)."""

    def __init__(
        self,
        *,
        max_running: int = DEFAULT_MAX_RUNNING,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        kill_grace: float = 2.0,
        ledger: Path | None = None,
    ) -> None:
        check_background_limits(max_running, idle_timeout)
        self.max_running = max_running
        self.idle_timeout = None if idle_timeout is None else float(idle_timeout)
        # Where the running commands are listed, so that a process that dies with
        # kill -9 can have them stopped later (``_ledger``); None: nowhere.
        self._ledger = ledger
        self._entries: dict[str, Entry] = {}
        self._slots = 0  # commands that may yield and have not ended: started or adopted
        self._next = 1
        self._closed = False

    # -- admission -------------------------------------------------------------------

    def admit(self) -> None:
        """Reserve a slot for a command that may yield; raise when the cap is reached."""
        if self._closed:
            raise HandleError(
                "this execution environment is closed; its background commands were stopped"
            )
        if self._slots >= self.max_running:
            running = [e for e in self._entries.values() if e.running]
            names = ", ".join(f"{e.handle} ({e.command[:40]!r})" for e in running) or "none yet"
            raise BackgroundLimitError(
                f"{self._slots} commands are already running in this environment (the limit "
                f"is {self.max_running}; background: {names}); stop one with its handle "
                "before starting another"
            )
        self._slots += 1

    def release(self) -> None:
        """Give back a slot of a command that ended without being adopted."""
        self._slots = max(0, self._slots - 1)

    def adopt(
        self,
        proc: Process,
        command: str,
        *,
        limits: ShellOutputLimits,
        timeout: float | None,
    ) -> str:
        """Keep ``proc`` running in the background (its slot was ``admit``ted); its handle.

        ``timeout``: seconds it may still run before it is stopped (None: no limit).
        """
        handle = f"bg-{self._next}"
        self._next += 1
        entry = Entry(handle, command, proc, limits, time.time())
        proc.session.tap = entry.feed
        proc.session.redirect(None)  # the call that started it has settled
        self._entries[handle] = entry
        entry.watcher = asyncio.create_task(self._watch(entry, timeout), name=f"toolfold {handle}")
        self._touch(entry)
        self._save_ledger()
        return handle

    def _save_ledger(self) -> None:
        if self._ledger is None:
            return
        owner, owner_start = os.getpid(), start_time(os.getpid())
        entries = [
            {
                "handle": e.handle,
                "command": e.command[:200],
                "pid": e.proc.pid,
                "exec_id": e.proc.exec_id,
                "owner_pid": owner,
                "owner_start": owner_start,
                "started": e.started,
                **({"tag": e.tag} if e.tag is not None else {}),
            }
            for e in self._entries.values()
            if e.running
        ]
        # Best effort: a ledger that cannot be written must not stop the command.
        with contextlib.suppress(OSError, ExecError):
            write_ledger(self._ledger, entries)

    # -- the lifetime of one command --------------------------------------------------

    async def _watch(self, entry: Entry, timeout: float | None) -> None:
        finished = asyncio.ensure_future(entry.proc.finished())
        stop = asyncio.ensure_future(entry.stop_requested.wait())
        try:
            done, _ = await asyncio.wait(
                [finished, stop], timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
            kill = True
            if finished in done:
                kill = not finished.result()  # leftovers still hold the output
                code = entry.proc.returncode()
                if code is not None and code >= 0:
                    entry.ended, entry.exit_code = "exited", code
                else:
                    entry.ended = "signal"
            elif stop in done:
                entry.ended = entry.stop_reason or "stopped"
            else:
                entry.ended = "timeout"
            await asyncio.shield(asyncio.ensure_future(entry.proc.teardown(kill)))
        finally:
            for fut in (finished, stop):
                if not fut.done():
                    fut.cancel()
            self._ended(entry)

    def _ended(self, entry: Entry) -> None:
        if entry.ended is None:  # pragma: no cover - the watcher itself was cancelled
            entry.ended = entry.stop_reason or "stopped"
        if entry.idle_timer is not None:
            entry.idle_timer.cancel()
        if entry.proc.stdin is not None:
            fd, entry.proc.stdin = entry.proc.stdin, None
            with contextlib.suppress(OSError):
                os.close(fd)
        entry.proc.drain()
        self.release()
        entry.done.set()
        entry.changed.set()
        self._save_ledger()

    def _touch(self, entry: Entry) -> None:
        entry.last_touch = time.monotonic()
        if self.idle_timeout is None or not entry.running:
            return
        if entry.idle_timer is not None:
            entry.idle_timer.cancel()
        entry.idle_timer = asyncio.get_running_loop().call_later(
            self.idle_timeout, self._idle, entry
        )

    def _idle(self, entry: Entry) -> None:
        if entry.running and entry.stop_reason is None and not entry.waiters:
            entry.stop_reason = "idle"
            entry.stop_requested.set()

    # -- operations ---------------------------------------------------------------------

    def _get(self, handle: str) -> Entry:
        entry = self._entries.get(handle) if isinstance(handle, str) else None
        if entry is None:
            known = ", ".join(self._entries) or "none"
            raise HandleError(
                f"no background command {handle!r} in this environment (known: {known}); "
                "list them (commands()) to see the handles"
            )
        return entry

    def _finish_read(self, entry: Entry, written: int | None = None) -> BackgroundRead:
        if entry.running:
            entry.proc.drain()
        read = entry.take(written)
        if not read.running:
            # Its end has been reported: forget it.
            self._entries.pop(entry.handle, None)
        return read

    async def _wait(self, entry: Entry, wait: float, until: str | None) -> None:
        """Wait up to ``wait`` seconds, less when the command ends or ``until`` appears in
        its new output."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        entry.waiters += 1
        try:
            while entry.running:
                if entry.running:
                    entry.proc.drain()
                if until is not None and until in entry.segment.snapshot().text:
                    return
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return
                entry.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(entry.changed.wait(), remaining)
        finally:
            entry.waiters -= 1
            self._touch(entry)

    async def read(
        self, handle: str, *, wait: float = 0.0, until: str | None = None
    ) -> BackgroundRead:
        """The output since the last read (see ``BackgroundRead``); first waits up to
        ``wait`` seconds, less when the command ends or ``until`` (a plain string) shows
        up in the new output. The read that reports the end forgets the handle."""
        _check_wait(wait, until)
        entry = self._get(handle)
        self._touch(entry)
        await self._wait(entry, wait, until)
        return self._finish_read(entry)

    async def write(
        self,
        handle: str,
        data: str | bytes,
        *,
        eof: bool = False,
        wait: float = 1.0,
        until: str | None = None,
    ) -> BackgroundRead:
        """Write ``data`` to the command's stdin (``eof``: then close it — on a terminal,
        send the end-of-file character), wait like ``read``, and return the new output.

        At most ``MAX_WRITE`` bytes. A command that does not read its input gets what
        fits in the pipe within ``wait``; ``written`` says how much that was.
        """
        _check_wait(wait, until)
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if len(raw) > MAX_WRITE:
            raise ExecConfigError(
                f"{len(raw)} bytes to write; one write sends at most {MAX_WRITE} bytes — "
                "write a file and have the command read it instead"
            )
        entry = self._get(handle)
        self._touch(entry)
        fd = entry.proc.stdin
        if not entry.running or fd is None:
            raise HandleError(
                f"{handle} ({entry.command[:60]!r}) has ended or its input was closed; "
                "read it for its last output"
            )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(wait, 1.0)
        if eof and entry.proc.tty is not None:
            raw += b"\x04"  # VEOF: the line discipline ends the read, as Ctrl-D does
        written = await write_all(fd, raw, deadline)
        if eof and entry.proc.tty is None and written == len(raw):
            entry.proc.stdin = None
            os.close(fd)
        await self._wait(entry, wait, until)
        return self._finish_read(entry, written)

    async def signal(
        self, handle: str, name: str, *, wait: float = 1.0, until: str | None = None
    ) -> BackgroundRead:
        """Send signal ``name`` (``SIGNALS``, e.g. ``"INT"``) to the command's process
        group, wait like ``read``, and return the new output."""
        _check_wait(wait, until)
        sig_name = name.upper().removeprefix("SIG") if isinstance(name, str) else ""
        if sig_name not in SIGNALS:
            raise ExecConfigError(
                f"signal {name!r} is not one of {', '.join(SIGNALS)}; use stop to end a command"
            )
        entry = self._get(handle)
        self._touch(entry)
        if not entry.running:
            raise HandleError(
                f"{handle} ({entry.command[:60]!r}) has ended; read it for its last output"
            )
        entry.proc.send_signal(getattr(signal, "SIG" + sig_name))
        await self._wait(entry, wait, until)
        return self._finish_read(entry)

    async def stop(self, handle: str) -> BackgroundRead:
        """Stop the command (SIGTERM to all its processes, SIGKILL after the grace) and
        return its last output."""
        entry = self._get(handle)
        await self._stop(entry, "stopped")
        return self._finish_read(entry)

    async def _stop(self, entry: Entry, reason: Ended) -> None:
        if entry.running:
            if entry.stop_reason is None:
                entry.stop_reason = reason
            entry.stop_requested.set()
            await entry.done.wait()

    async def wait_ended(self, handle: str) -> None:
        """Wait until the command has ended (not an interaction: its idle clock runs on)."""
        await self._get(handle).done.wait()

    def resize(self, handle: str, columns: int, rows: int) -> None:
        """Tell a command on a pseudo-terminal its window is now ``columns`` x ``rows``."""
        entry = self._get(handle)
        if entry.proc.tty is None:
            raise HandleError(f"{handle} does not run on a terminal; start it with tty=True")
        from ._pty import set_window_size

        if entry.running:
            set_window_size(entry.proc.tty, columns, rows)

    def follow(
        self, handle: str, *, tag: str | None = None
    ) -> Callable[[UpdateConsumer], Awaitable[BackgroundInfo]]:
        """Hold on to the command ``handle`` now (a read that reports its end cannot make
        it unknown from here on); the returned coroutine function sends its paced
        updates (its whole bounded view, from a ``Replace``, to its final state) to an
        ``on_update`` until it ends, then returns its end (``exit_code``, ``ended``).
        Not an interaction: its idle clock runs on, and ``read`` is unaffected.

        ``tag`` (at most 200 characters, opaque here) goes into the ledger entry, so the
        report of a command a crashed process left running (``stop_orphans``) names it.
        """
        if tag is not None and (not isinstance(tag, str) or not 0 < len(tag) <= 200):
            raise ExecConfigError(f"tag must be a str of 1 to 200 characters, got {tag!r:.80}")
        entry = self._get(handle)
        if tag is not None and entry.running:
            entry.tag = tag
            self._save_ledger()

        async def run(on_update: UpdateConsumer) -> BackgroundInfo:
            session = entry.proc.session
            if entry.running:
                session.redirect(on_update)
                try:
                    await entry.done.wait()
                finally:
                    session.redirect(None)
            else:  # it ended before anyone listened: its final view, once
                sent = on_update(Replace(session.view()))
                if inspect.isawaitable(sent):
                    await sent
            return self._info(entry, time.monotonic())

        return run

    def _info(self, e: Entry, now: float) -> BackgroundInfo:
        return BackgroundInfo(
            handle=e.handle,
            command=e.command,
            pid=e.proc.pid,
            running=e.running,
            tty=e.proc.tty is not None,
            started=e.started,
            total_bytes=e.proc.session.capture.total_bytes,
            unread_bytes=e.proc.session.capture.total_bytes - e.offset,
            idle=now - e.last_touch,
            exit_code=e.exit_code,
            ended=e.ended,
        )

    def commands(self) -> list[BackgroundInfo]:
        """The commands of this environment not yet forgotten (running, or ended and not
        read since), oldest first."""
        now = time.monotonic()
        return [self._info(e, now) for e in self._entries.values()]

    @property
    def running(self) -> int:
        """How many commands are running (adopted or still in their first call)."""
        return self._slots

    async def aclose(self) -> list[BackgroundRead]:
        """Stop every command still running (``ended="closed"``) and refuse new ones;
        what each printed since its last read, for the caller to report."""
        self._closed = True
        entries = [e for e in self._entries.values() if e.running]
        await asyncio.gather(*(self._stop(e, "closed") for e in entries))
        return [self._finish_read(e) for e in entries]


def _check_wait(wait: float, until: str | None) -> None:
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= 3600:
        raise ExecConfigError(f"wait must be a number of seconds from 0 to 3600, got {wait!r}")
    if until is not None and (not isinstance(until, str) or not until):
        raise ExecConfigError(f"until must be a non-empty string or None, got {until!r}")


__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_RUNNING",
    "MAX_WRITE",
    "SIGNALS",
    "BackgroundCommands",
    "BackgroundInfo",
    "BackgroundLimitError",
    "BackgroundRead",
    "Ended",
    "HandleError",
    "Process",
]
