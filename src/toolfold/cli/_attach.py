"""``toolfold ps``, ``attach``, ``send`` and ``stop``: the detached runs of a store.

``attach`` follows a run from the store, the way any reader of it would: every quarter
second it reads the call's recovered pending output (its last checkpoint; checkpoints
come at most once a second while output changes) and prints the lines that are new
since the last read, counted with the window's exact line totals, so nothing is printed
twice. Lines that went out of the window between two reads (more new lines than the
window holds) are not in the store: one bracketed note says how many, and where the
spill file holding them is. When the call settles it prints the rest and the outcome,
and exits with the command's status. Ctrl-C detaches: the run goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import stat
import sys
import time
from typing import Any

from toolfold._units import plural
from toolfold.execenv import kill_marked

from ._calls import find_call, list_calls, pending_output
from ._detach import (
    LOG_FILE,
    MARK_VAR,
    STDIN_FIFO,
    check_private,
    detached_root,
    list_runs,
    load_run,
    refuse_link,
    remove_control,
    worker_alive,
)
from ._errors import CliError, UnknownCallError
from ._inspect import print_table
from ._store import StoreSpec, open_store

MAX_SEND = 64 * 1024
"""Bytes one ``send`` may write: input is typed, not streamed (as ``bash_write``)."""
SEND_WAIT = 5.0
"""How long ``send`` waits for a command that does not read its input to take it."""
POLL = 0.25
DEFAULT_LIMIT = 50
MAX_LIMIT = 1000


def ps_command(spec: StoreSpec, limit: int) -> int:
    """List the detached runs (newest first, at most ``limit``)."""
    if not 1 <= limit <= MAX_LIMIT:
        raise CliError(f"--limit must be between 1 and {MAX_LIMIT}, got {limit}")
    runs = sorted(list_runs(spec), key=lambda r: str(r.info.get("started", "")), reverse=True)
    if not runs:
        print(f"no detached runs in {detached_root(spec)}")
        return 0
    rows = []
    for run in runs[:limit]:
        rows.append(
            [
                run.run_id,
                str(run.info.get("pid", "?")),
                "running" if run.alive else "dead",
                str(run.info.get("started", "")),
                str(run.info.get("command", "")),
            ]
        )
    print_table(["id", "pid", "state", "started", "command"], rows)
    if len(runs) > limit:
        print(f"... and {len(runs) - limit} more (--limit)", file=sys.stderr)
    if any(not r.alive for r in runs):
        print(
            "toolfold: a dead run's process was killed before its call settled: "
            "`toolfold stop ID` stops what it left, `toolfold resume ID` settles the call",
            file=sys.stderr,
        )
    return 0


def send_command(spec: StoreSpec, run_id: str, data: bytes, eof: bool) -> int:
    """Write ``data`` to the run's stdin FIFO; ``eof``: then close the command's input."""
    if len(data) > MAX_SEND:
        raise CliError(
            f"{len(data):,} bytes to send; one send writes at most {MAX_SEND:,} bytes — write "
            "a file and have the command read it instead"
        )
    dir_fd, info = load_run(spec, run_id)
    path = os.path.join(detached_root(spec), run_id, STDIN_FIFO)
    try:
        if not worker_alive(info):
            raise CliError(f"detached run {run_id} is not running (see `toolfold ps`)")
        if not info.get("input"):
            raise CliError(
                f"detached run {run_id} takes no input: its command runs on another machine "
                "(--ssh / --exec-host), where its stdin is /dev/null"
            )
        try:
            # O_RDWR: opening a FIFO so never blocks nor fails for want of a reader, so
            # what is there is always checked (the worker being alive says a reader is).
            fd = os.open(
                STDIN_FIFO,
                os.O_RDWR | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=dir_fd,
            )
        except OSError as exc:
            raise refuse_link(path, exc) from exc
    finally:
        os.close(dir_fd)
    try:
        check_private(fd, path, stat.S_ISFIFO, "a FIFO")
        sent = _write_within(fd, data, SEND_WAIT)
    finally:
        os.close(fd)
    if sent < len(data):
        raise CliError(
            f"only {sent:,} of {len(data):,} bytes were taken by detached run {run_id} "
            f"within {SEND_WAIT:g} s: its command is not reading its input"
        )
    # The worker holds the FIFO's last other write end; it closes it on SIGUSR1.
    if eof and worker_alive(info):
        os.kill(int(info["pid"]), signal.SIGUSR1)
    print(
        f"toolfold: sent {plural(sent, 'byte')} to {run_id}"
        + (" and closed its input" if eof else ""),
        file=sys.stderr,
    )
    return 0


def _write_within(fd: int, data: bytes, wait: float) -> int:
    deadline = time.monotonic() + wait
    done = 0
    while done < len(data):
        try:
            done += os.write(fd, data[done:])
            continue
        except BlockingIOError:
            pass
        except BrokenPipeError:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        select.select([], [fd], [], remaining)
    return done


def stop_command(spec: StoreSpec, run_id: str, grace: float) -> int:
    """SIGTERM the run's worker (it cancels the call: the command's group gets SIGTERM,
    then SIGKILL, and the call settles as cancelled); after ``grace`` seconds, SIGKILL
    every process of the run (by its mark) and say that the call is left to resume."""
    if not 0 <= grace <= 3600:
        raise CliError(f"--time must be between 0 and 3600 seconds, got {grace:g}")
    dir_fd, info = load_run(spec, run_id)
    os.close(dir_fd)
    pid = info.get("pid")
    mark = info.get("mark")
    if worker_alive(info) and isinstance(pid, int):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if _wait_gone(pid, grace):
            print(f"toolfold: stopped {run_id}; `toolfold show {run_id}` has its output")
            return 0
    killed = kill_marked(mark, MARK_VAR) if isinstance(mark, str) and len(mark) >= 16 else 0
    remove_control(spec, run_id)
    what = f"killed {plural(killed, 'process', 'processes')}" if killed else "nothing was left"
    print(
        f"toolfold: {run_id} did not end by itself: {what}; its call is unsettled, "
        f"`toolfold resume {run_id}` settles it from its last checkpoint"
    )
    return 0


def _wait_gone(pid: int, timeout: float) -> bool:
    """Wait (bounded) for ``pid`` to exit, on its pidfd."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        deadline = time.monotonic() + timeout
        while True:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            # Exited: a zombie until init reaps it (the worker is not our child).
            if ready or start_gone(pid):
                return True
            if time.monotonic() >= deadline:
                return False
    finally:
        os.close(fd)


def start_gone(pid: int) -> bool:
    from ._detach import start_time

    return start_time(pid) is None


# -- attach -------------------------------------------------------------------------


class LineFollower:
    """Prints the new complete lines of successive windows of one output (see the
    module doc); ``printed`` counts the output's lines already printed."""

    def __init__(self, retain: str) -> None:
        self.retain = retain
        self.printed = 0

    def update(
        self, blocks: list[str], truncation: Any, spill: Any, *, final: bool = False
    ) -> None:
        """``blocks``: the text blocks of the window (a cut ``head_tail`` window is three:
        the start, the marker line, the end), without a footer."""
        t = truncation if isinstance(truncation, dict) else {}
        total = t.get("total_lines")
        ends_at_total = True
        if len(blocks) >= 3 and t.get("cut_lines"):
            text = blocks[-1]  # the end part: its last line is the output's last
        else:
            text = "".join(blocks)
            if t.get("truncated") and self.retain == "head":
                ends_at_total = False  # the window is the start; the end is not in it
        lines = text.split("\n")
        partial = lines.pop()
        if ends_at_total and isinstance(total, int):
            last = total - (1 if partial else 0)
        else:
            last = len(lines)
        first = last - len(lines) + 1
        out = sys.stdout
        if self.printed < first - 1:
            out.flush()
            where = f": the full output is in {spill}" if isinstance(spill, str) else ""
            print(
                f"[... {plural(first - 1 - self.printed, 'line')} went past the window "
                f"between two reads{where}]",
                file=sys.stderr,
                flush=True,
            )
            self.printed = first - 1
        for number, line in enumerate(lines, start=first):
            if number > self.printed:
                out.write(line + "\n")
        self.printed = max(self.printed, last)
        if final and partial:
            out.write(partial + "\n")
        out.flush()


def _blocks(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    return [
        str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
    ]


def _exit_status(message: dict[str, Any]) -> int:
    details = message.get("details") if isinstance(message.get("details"), dict) else {}
    if message.get("outcome") in ("cancelled", "interrupted"):
        return 130
    code = details.get("exit_code") if isinstance(details, dict) else None
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF if code >= 0 else 1
    return 1 if message.get("is_error") else 0


async def attach_command(spec: StoreSpec, run_id: str) -> int:
    """Follow detached run ``run_id`` until its call settles (exit: the command's
    status) or Ctrl-C (exit 0: the run goes on)."""
    try:
        dir_fd, info = load_run(spec, run_id)
        os.close(dir_fd)
    except CliError as exc:
        # It may have ended (its control directory goes with it): show its result.
        return await _attach_ended(spec, run_id, exc)
    follower = LineFollower(str(info.get("retain", "tail")))
    loop = asyncio.get_running_loop()
    detached = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, detached.set)
    try:
        async with open_store(spec, create=False, read_only=True) as repo:
            while not detached.is_set():
                status = await _poll(repo, spec, run_id, info, follower)
                if status is not None:
                    return status
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(detached.wait(), POLL)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
    sys.stdout.flush()
    print(
        f"toolfold: detached from {run_id}; it keeps running (`toolfold stop {run_id}` stops it)",
        file=sys.stderr,
    )
    return 0


async def _attach_ended(spec: StoreSpec, run_id: str, missing: CliError) -> int:
    """The whole result of a run that has already ended, or ``missing`` re-raised."""
    from toolfold.storage import SessionNotFoundError, StorageError

    try:
        async with open_store(spec, create=False, read_only=True) as repo:
            session = await repo.open_session(run_id)
            try:
                calls = await list_calls(session, last=1)
            finally:
                await session.close()
    except (SessionNotFoundError, StorageError, CliError):
        raise missing from None
    if not calls or calls[-1].message is None:
        raise missing
    call = calls[-1]
    record = call.record if isinstance(call.record, dict) else {}
    assert call.message is not None
    _final(LineFollower("head"), call.message, record)
    return _exit_status(call.message)


async def _poll(
    repo: Any, spec: StoreSpec, run_id: str, info: dict[str, Any], follower: LineFollower
) -> int | None:
    from toolfold.storage import SessionNotFoundError

    call_id = info.get("call_id")
    alive = worker_alive(info)
    call = None
    if isinstance(call_id, str):
        try:
            session = await repo.open_session(str(info.get("session", run_id)))
        except SessionNotFoundError:
            session = None
        if session is not None:
            try:
                with contextlib.suppress(UnknownCallError):
                    call = await find_call(session, call_id)
                if call is not None and call.message is None:
                    state = await pending_output(session, call)
                    if isinstance(state, dict):
                        follower.update(
                            _blocks(state.get("content")),
                            state.get("truncation"),
                            state.get("spill_path"),
                        )
            finally:
                await session.close()
    if call is not None and call.message is not None:
        record = call.record if isinstance(call.record, dict) else {}
        if "ended_at" not in record and alive:
            return None  # its totals are recorded right after the settlement
        _final(follower, call.message, record)
        return _exit_status(call.message)
    if not alive:
        sys.stdout.flush()
        log = os.path.join(detached_root(spec), run_id, LOG_FILE)
        print(
            f"toolfold: the process of detached run {run_id} ended before its call settled "
            f"(killed?); `toolfold resume {run_id}` settles it, {log} has its last words",
            file=sys.stderr,
        )
        return 2
    return None


def _final(follower: LineFollower, message: dict[str, Any], record: dict[str, Any]) -> None:
    blocks = _blocks(message.get("content"))
    truncation = record.get("truncation")
    shown = truncation.get("output_lines") if isinstance(truncation, dict) else None
    footer = ""
    if isinstance(shown, int) and blocks:
        # The window's lines come first in the last block; the footer and the error line
        # follow them. A cut head_tail window's start block counts in output_lines too.
        cut = len(blocks) >= 3 and isinstance(truncation, dict) and truncation.get("cut_lines")
        earlier = blocks[:1] if cut else blocks[:-1]  # a cut's marker line is not counted
        shown -= sum(b.count("\n") for b in earlier)
        lines = blocks[-1].split("\n")
        window = "\n".join(lines[:shown])
        footer = "\n".join(lines[shown:])
        blocks[-1] = window + ("\n" if len(lines) > shown and window else "")
    follower.update(blocks, truncation, record.get("spill_path"), final=True)
    details = message.get("details") if isinstance(message.get("details"), dict) else {}
    code = details.get("exit_code") if isinstance(details, dict) else None
    note = " ".join(footer.split())
    print(
        f"toolfold: {message.get('outcome', 'ok')}"
        + (f", exit code {code}" if code is not None else "")
        + (f" · {note}" if note else ""),
        file=sys.stderr,
        flush=True,
    )
