"""``toolfold run -- COMMAND`` (no option) on a direct, synchronous driver: no asyncio
event loop and no harness, for the command run most often (docs/cli.md, "The direct
path"; docs/architecture.md).

Everything that decides what is written or shown is the code the asyncio path runs: the
start's writes (``start_writes``, ``LeaseTerms.take_writes``, the run record), the paced
checkpoints (``StreamPlanner``), the lease renewals, the settlement
(``finish_output``, ``result_entry``, ``settlement_writes``), the store's transactions
(``SyncSqliteSession``: the SQLite session's own functions), the capture, spill and
pacing (``CaptureSession``, ``PipeReader``, ``AdaptivePublisher`` on a ``SelectorLoop``),
the status lines (``CallWatcher``). This module is the glue: a clock, a loop turn,
signals, the process group.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

from toolfold import _otel

from ._store import StoreSpec


def direct_eligible(spec: StoreSpec) -> bool:
    """Whether a bare ``run`` takes the direct driver: its store is a SQLite file, stdout
    and stderr are not both a terminal (the live view runs on asyncio), no OpenTelemetry
    provider listens (spans and metrics are the harness's), and ``TOOLFOLD_DIRECT_RUN``
    is not ``0`` (the way back to the asyncio path). A bare run is local, unconfined
    (``--sandbox off``) and not detached by definition."""
    if os.environ.get("TOOLFOLD_DIRECT_RUN") == "0":
        return False
    return (
        spec.kind == "sqlite"
        and not (sys.stdout.isatty() and sys.stderr.isatty())
        and _otel.tracer() is None
        and _otel.meters() is None
    )


def run_bare(command: tuple[str, ...]) -> None:
    """``toolfold run -- COMMAND...`` with no option, on the direct driver when
    :func:`direct_eligible` (it then ends the process, ``Finished``); returns when not,
    for the caller to run it on asyncio."""
    from ._store import resolve_store

    spec = resolve_store(None)
    if not direct_eligible(spec):
        return
    from toolfold import _json

    # Before storage is imported: this process encodes a few small records and exits,
    # for which the standard library's json is cheaper to load than orjson (_json).
    _json.prefer_standard_library()
    from toolfold.durability import DEFAULT_LEASE_TTL
    from toolfold.execenv import DEFAULT_MAX_SPILL
    from toolfold.output import OutputPolicy

    from ._process import _finish, _quote
    from ._run_result import new_session_name

    text = command[0] if len(command) == 1 else " ".join(_quote(part) for part in command)
    status = run_direct(
        spec,
        new_session_name(),
        text,
        OutputPolicy(retain="tail"),
        DEFAULT_MAX_SPILL,
        DEFAULT_LEASE_TTL,
    )
    _finish(status)


def run_direct(
    spec: StoreSpec, session_name: str, command: str, policy: Any, max_spill: int, ttl: float
) -> int:
    """Run ``command`` as one durable ``bash`` call without asyncio; the exit status."""
    from toolfold.durability import (
        CallRecord,
        LeaseTerms,
        StreamPlanner,
        default_host_id,
        lease_holder,
        lease_info,
        pending_tool_output,
        result_entry,
        settlement_writes,
        start_writes,
    )
    from toolfold.execenv import ShellExecResult
    from toolfold.execenv._child import Streams, default_shell
    from toolfold.execenv._errors import ExecStartError
    from toolfold.execenv._pipes import PipeReader
    from toolfold.execenv._publisher import AdaptivePublisher
    from toolfold.execenv._reaper import (
        DEFAULT_EXIT_GRACE,
        DEFAULT_KILL_GRACE,
        EXEC_ID_VAR,
        become_subreaper,
        command_processes,
        kill_command,
        new_exec_id,
        reap_exited,
        reap_killed,
        signal_all,
        terminate_command,
    )
    from toolfold.execenv._selector_loop import SelectorLoop
    from toolfold.execenv._session import CaptureSession
    from toolfold.execenv._spawn import PidfdChild
    from toolfold.harness._result import (
        CANCELLED_MARKER,
        INTERRUPTION_MARKER,
        Outcome,
        ToolResult,
        describe_call,
        error_text,
    )
    from toolfold.history import mark_activity, new_run_record, run_record_address, settled_record
    from toolfold.output import ToolOutput
    from toolfold.storage import (
        ConflictError,
        FsyncPolicy,
        StorageError,
        ephemeral_scope,
        set_value,
    )
    from toolfold.storage._sqlite_sync import SqliteFile, SyncSqliteSession
    from toolfold.tools._bash_output import bash_capture, finish_output

    from ._errors import StoreOpenError
    from ._process import resume_collector
    from ._run_result import (
        _store_flag,
        checkpoint_interval,
        exit_status,
        print_result,
        print_summary,
    )
    from ._store import prepare, storage_message
    from ._view import PLAIN_STATUS_INTERVAL, CallWatcher

    prepare(spec, create=True)
    file = SqliteFile(Path(spec.url[len("sqlite:") :]), fsync=FsyncPolicy(), read_only=False)
    try:
        session = SyncSqliteSession.open(file, session_name, create=True)
    except StorageError as exc:
        raise StoreOpenError(storage_message(exc, spec)) from exc
    spill_dir = spec.spill_dir(session_name)
    mark_activity(spill_dir)
    # The ids the asyncio path draws from uuid4().hex[:12]: 12 random hex digits, without
    # importing uuid (which imports platform).
    run_id = f"run-{os.urandom(6).hex()}"
    call_id = f"call-{os.urandom(6).hex()}"
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    record = new_run_record(command, str(spill_dir), started)
    args = {"command": command, "yield_after": None}
    call = CallRecord(run_id, call_id, "bash", call_id, args, run_id, "turn-1")
    lease = LeaseTerms(run_id, default_host_id(), 1, ttl=ttl, clock=time.time)
    writes, first = lease.take_writes([set_value(run_record_address(call_id), record)])
    try:
        session.commit_across(
            writes, start_writes(run_id, run_id, [call], session.next_seq - 1), expect=[first]
        )
    except StorageError as exc:
        raise StoreOpenError(storage_message(exc, spec)) from exc

    title = f"{command}  [call {call_id} in session {session_name}, store {spec.describe()}]"
    print(f"toolfold: {title}", file=sys.stderr, flush=True)
    out = ToolOutput(policy)
    planner = StreamPlanner(
        pending_tool_output(run_id, call_id),
        out.open_stream(),
        interval=checkpoint_interval(),
    )
    clock = time.monotonic
    loop = SelectorLoop()
    # The view's side, as the harness publishes it: the sink's ops, paced, folded by the
    # same watcher PlainView reads.
    watcher = CallWatcher()
    live = out.open_stream()

    def produce() -> tuple[list[Any], int] | None:
        ops = live.take()
        return (ops, live.last_take_bytes) if ops else None

    publisher: AdaptivePublisher[list[Any]] = AdaptivePublisher(
        produce=produce,
        consume=watcher.fold,
        min_interval=0.1,
        target_rate=100 * 1024,
        clock=loop,
    )
    out.on_change(publisher.mark_dirty)
    publisher.mark_dirty()
    failures: list[Any] = []
    reader_box: list[Any] = []
    capture = CaptureSession(
        bash_capture(policy, max_spill),
        spill_dir=spill_dir,
        on_update=out.feed,
        on_failure=failures.append,
        clock=loop,
        on_pause=lambda: reader_box[0].pause(),
        on_resume=lambda: reader_box[0].resume(),
        loop=loop,
    )

    def fenced_commit(batch: Any) -> None:
        try:
            session.commit(batch, expect=lease.expects())
        except ConflictError as exc:
            # Another host took the call over: the same FencedError (and so the same
            # message) the asyncio path's Lease raises, naming the holder now.
            holder = None
            with contextlib.suppress(StorageError, OSError):
                holder = lease_info(session.get_value(lease_holder(run_id)))
            raise lease.fenced(exc, holder) from None

    signalled: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        signalled.append(signum)
        note = (
            "cancelling the command (signal again to stop waiting for it)"
            if len(signalled) == 1
            else "interrupting: the call settles as interrupted"
        )
        print(f"toolfold: {note}", file=sys.stderr, flush=True)
        loop.call_soon_threadsafe(lambda: None)  # wake the loop

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    streams = Streams.open(tty=False, writable=False)
    flags = {"exited": False, "closed": False}

    class _Exit:
        def process_exited(self) -> None:
            flags["exited"] = True

    reader = PipeReader(
        cast(Any, loop), streams.read_ends, capture, lambda: flags.update(closed=True)
    )
    reader_box.append(reader)
    # Every process of the command carries the marker, so the processes that left its
    # group are found and stopped with it (``_reaper``, as ``LocalExecEnv`` does).
    become_subreaper()
    exec_id = new_exec_id()
    env = dict(os.environ)
    env[EXEC_ID_VAR] = exec_id
    shell = default_shell()
    resume_collector()  # start-up is over (_entry.main paused the collector)
    try:
        popen = subprocess.Popen(
            [shell, "-c", command],
            stdin=streams.child_stdin,
            stdout=streams.child_stdout,
            stderr=streams.child_stderr,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        reader.close()
        raise ExecStartError(
            f"cannot start {shell!r} -c {command[:80]!r} (cwd=None): "
            f"{exc.strerror or exc}; check that the shell exists and cwd is a directory"
        ) from exc
    finally:
        streams.close_child_ends()
    child = PidfdChild(cast(Any, loop), popen, _Exit())
    reader.start()
    next_beat = clock() + ttl / 3
    next_status = clock() + PLAIN_STATUS_INTERVAL
    killed_at: float | None = None  # SIGTERM sent (LocalExecEnv's first step)
    sigkilled_at: float | None = None  # and SIGKILL, once the grace passed
    exited_at: float | None = None
    escaped: set[int] = set()
    seen = 0
    cancelled = interrupted = background = False

    def terminate() -> None:
        # The group and the processes that left it: found while the shell lives (it
        # is reaped only by popen.wait() below, so its pid cannot be reused meanwhile).
        nonlocal killed_at, escaped
        killed_at = clock()
        escaped = terminate_command(popen.pid, exec_id, None if flags["exited"] else popen.pid)

    try:
        while not (flags["exited"] and flags["closed"]):
            if len(signalled) >= 2:
                interrupted = True
                break
            if signalled and killed_at is None:
                cancelled = True
                terminate()
            if failures and killed_at is None:
                terminate()  # the output cannot be kept: stop the command
            if flags["exited"] and exited_at is None:
                exited_at = clock()
            if (
                exited_at is not None
                and clock() - exited_at >= DEFAULT_EXIT_GRACE
                and killed_at is None
            ):
                # What the shell left running still holds the pipes: stop it.
                background = True
                terminate()
            if (
                killed_at is not None
                and sigkilled_at is None
                and clock() - killed_at >= DEFAULT_KILL_GRACE
            ):
                escaped = kill_command(popen.pid, exec_id, escaped)
                sigkilled_at = clock()
            if sigkilled_at is not None and flags["exited"] and clock() - sigkilled_at >= 1.0:
                # Something still holds the pipes a moment after SIGKILL: read what is
                # buffered so far, then close them regardless (as LocalExecEnv does).
                break
            now = clock()
            wait = min(next_beat, next_status) - now
            if planner.source.dirty:
                wait = min(wait, planner.next_due())
            if exited_at is not None or killed_at is not None:
                wait = min(wait, 0.05)
            loop.run_once(max(0.0, wait))
            now = clock()
            if planner.due():
                try:
                    fenced_commit(planner.plan())
                except (StorageError, OSError):
                    planner.lost()
            if now >= next_beat:
                next_beat = now + ttl / 3
                with contextlib.suppress(StorageError, OSError):
                    fenced_commit(lease.renew_writes())
            if now >= next_status:
                next_status = now + PLAIN_STATUS_INTERVAL
                if watcher.updates != seen:
                    seen = watcher.updates
                    print(f"toolfold: {watcher.status()}", file=sys.stderr, flush=True)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    if interrupted or not flags["exited"]:
        escaped = kill_command(popen.pid, exec_id, escaped)
    reader.close()
    child.close()
    returncode = popen.wait()
    left = command_processes(exec_id, None)
    if killed_at is not None or interrupted:
        signal_all(left, signal.SIGKILL)
        reap_killed(left | escaped)
    else:
        reap_exited(left)  # left running on purpose (output redirected): reaped later
    final = capture.finish_on()
    loop.close()
    killed = cancelled or interrupted
    result = ShellExecResult.from_view(
        final,
        exit_code=None if killed or returncode < 0 else returncode,
        timed_out=False,
        cancelled=killed,
        background_killed=background,
    )
    failure = capture.failure
    error = finish_output(out, result, timeout=None) if failure is None else None
    outcome: Outcome
    notice: str | None
    if failure is not None:
        outcome, notice = "error", error_text(failure)
    elif interrupted:
        outcome, notice = "interrupted", INTERRUPTION_MARKER
    elif cancelled:
        outcome, notice = "cancelled", CANCELLED_MARKER
    elif error is not None:
        outcome, notice = "error", error
    else:
        outcome, notice = "ok", None
    state = out.settle(notice)
    publisher.force()  # the final publication
    tool_result = ToolResult.from_state(
        state, tool_call_id=call_id, tool_name="bash", outcome=outcome
    )
    message = tool_result.to_message().to_json()
    try:
        if planner.stats.batches or planner.stats.failed:
            fenced_commit(planner.plan())  # the forced terminal write
        planner.fence()
        entry = result_entry(
            message, operation_id=run_id, run_id=run_id, turn_id="turn-1", what=describe_call(args)
        )
        fenced_commit(
            settlement_writes(
                entry,
                retire=ephemeral_scope(run_id),
                with_writes=[settled_record(call_id, record, state)],
                lease=lease,
            )
        )
    except StorageError as exc:
        from ._errors import StoreWriteError

        raise StoreWriteError(
            f"store {spec.describe()} could not record the end of call {call_id}: "
            f"{' '.join(str(exc).split())} — the call is left unsettled with "
            "its output up to its last checkpoint; once the store can be written again, "
            f"run `toolfold resume {session_name}{_store_flag(spec)}`"
        ) from exc
    finally:
        file.close()
    print_result(message, as_json=False)
    status = exit_status(tool_result, signalled[0] if signalled else None)
    print_summary(watcher, message, status, spec, session_name, call_id)
    return status
