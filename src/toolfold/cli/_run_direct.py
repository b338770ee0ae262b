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
    """Run ``command`` as one durable ``bash`` call without asyncio; the exit status.

    The steps, in order: commit the start, set up the output's capture and view, start
    the command, turn the loop until it ends or is stopped, stop and reap what it left,
    settle the call, print the result."""
    call = _DirectCall(spec, session_name, command, ttl)
    call.start()
    call.watch_output(policy, max_spill)
    call.spawn()
    call.wait()
    returncode = call.reap()
    message, tool_result = call.settle(returncode)
    return call.report(message, tool_result)


class _DirectCall:
    """One call's state across the steps of :func:`run_direct`. Each step imports what it
    uses when it runs (start-up: importing this module loads none of it)."""

    def __init__(self, spec: StoreSpec, session_name: str, command: str, ttl: float) -> None:
        self.spec = spec
        self.session_name = session_name
        self.command = command
        self.ttl = ttl
        self.args = {"command": command, "yield_after": None}
        self.clock = time.monotonic
        # Set by the steps, in order.
        self.file: Any = None
        self.session: Any = None
        self.spill_dir: Path = Path()
        self.run_id = self.call_id = ""
        self.record: Any = None
        self.lease: Any = None
        self.out: Any = None
        self.planner: Any = None
        self.loop: Any = None
        self.watcher: Any = None
        self.live: Any = None
        self.publisher: Any = None
        self.failures: list[Any] = []
        self.capture: Any = None
        self.signalled: list[int] = []
        self.old_handlers: dict[int, Any] = {}
        self.exited = self.closed = False
        self.reader: Any = None
        self.exec_id = ""
        self.popen: Any = None
        self.child: Any = None
        self.killed_at: float | None = None  # SIGTERM sent (LocalExecEnv's first step)
        self.sigkilled_at: float | None = None  # and SIGKILL, once the grace passed
        self.escaped: set[int] = set()
        self.cancelled = self.interrupted = self.background = False

    def start(self) -> None:
        """Open the store and commit the start: the run record, the lease, the operation
        and its call, in one transaction; then the title line."""
        from toolfold.durability import CallRecord, LeaseTerms, default_host_id, start_writes
        from toolfold.history import mark_activity, new_run_record, run_record_address
        from toolfold.storage import FsyncPolicy, StorageError, set_value
        from toolfold.storage._sqlite_sync import SqliteFile, SyncSqliteSession

        from ._errors import StoreOpenError
        from ._store import prepare, storage_message

        spec = self.spec
        prepare(spec, create=True)
        self.file = SqliteFile(
            Path(spec.url[len("sqlite:") :]), fsync=FsyncPolicy(), read_only=False
        )
        try:
            self.session = SyncSqliteSession.open(self.file, self.session_name, create=True)
        except StorageError as exc:
            raise StoreOpenError(storage_message(exc, spec)) from exc
        self.spill_dir = spec.spill_dir(self.session_name)
        mark_activity(self.spill_dir)
        # The ids the asyncio path draws from uuid4().hex[:12]: 12 random hex digits,
        # without importing uuid (which imports platform).
        run_id = self.run_id = f"run-{os.urandom(6).hex()}"
        call_id = self.call_id = f"call-{os.urandom(6).hex()}"
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        self.record = new_run_record(self.command, str(self.spill_dir), started)
        call = CallRecord(run_id, call_id, "bash", call_id, self.args, run_id, "turn-1")
        self.lease = LeaseTerms(run_id, default_host_id(), 1, ttl=self.ttl, clock=time.time)
        writes, first = self.lease.take_writes(
            [set_value(run_record_address(call_id), self.record)]
        )
        try:
            self.session.commit_across(
                writes,
                start_writes(run_id, run_id, [call], self.session.next_seq - 1),
                expect=[first],
            )
        except StorageError as exc:
            raise StoreOpenError(storage_message(exc, spec)) from exc
        title = (
            f"{self.command}  [call {call_id} in session {self.session_name}, "
            f"store {spec.describe()}]"
        )
        print(f"toolfold: {title}", file=sys.stderr, flush=True)

    def watch_output(self, policy: Any, max_spill: int) -> None:
        """The output's sink, its paced checkpoints (``StreamPlanner``), the view's side
        (the sink's ops, paced, folded by the watcher ``PlainView`` reads, as the harness
        publishes them) and the capture, on one ``SelectorLoop``."""
        from toolfold.durability import StreamPlanner, pending_tool_output
        from toolfold.execenv._publisher import AdaptivePublisher
        from toolfold.execenv._selector_loop import SelectorLoop
        from toolfold.execenv._session import CaptureSession
        from toolfold.output import ToolOutput
        from toolfold.tools._bash_output import bash_capture

        from ._run_result import checkpoint_interval
        from ._view import CallWatcher

        self.out = out = ToolOutput(policy)
        self.planner = StreamPlanner(
            pending_tool_output(self.run_id, self.call_id),
            out.open_stream(),
            interval=checkpoint_interval(),
        )
        self.loop = loop = SelectorLoop()
        self.watcher = CallWatcher()
        self.live = out.open_stream()
        self.publisher = AdaptivePublisher(
            produce=self._produce,
            consume=self.watcher.fold,
            min_interval=0.1,
            target_rate=100 * 1024,
            clock=loop,
        )
        out.on_change(self.publisher.mark_dirty)
        self.publisher.mark_dirty()
        self.capture = CaptureSession(
            bash_capture(policy, max_spill),
            spill_dir=self.spill_dir,
            on_update=out.feed,
            on_failure=self.failures.append,
            clock=loop,
            on_pause=lambda: self.reader.pause(),
            on_resume=lambda: self.reader.resume(),
            loop=loop,
        )

    def _produce(self) -> tuple[list[Any], int] | None:
        ops = self.live.take()
        return (ops, self.live.last_take_bytes) if ops else None

    def fenced_commit(self, batch: Any) -> None:
        """Commit ``batch`` under the lease's precondition."""
        from toolfold.durability import lease_holder, lease_info
        from toolfold.storage import ConflictError, StorageError

        try:
            self.session.commit(batch, expect=self.lease.expects())
        except ConflictError as exc:
            # Another host took the call over: the same FencedError (and so the same
            # message) the asyncio path's Lease raises, naming the holder now.
            holder = None
            with contextlib.suppress(StorageError, OSError):
                holder = lease_info(self.session.get_value(lease_holder(self.run_id)))
            raise self.lease.fenced(exc, holder) from None

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.signalled.append(signum)
        note = (
            "cancelling the command (signal again to stop waiting for it)"
            if len(self.signalled) == 1
            else "interrupting: the call settles as interrupted"
        )
        print(f"toolfold: {note}", file=sys.stderr, flush=True)
        self.loop.call_soon_threadsafe(lambda: None)  # wake the loop

    def spawn(self) -> None:
        """SIGINT and SIGTERM handlers (restored by :meth:`wait`), then the command's
        shell in its own process group, its pipes read by the loop."""
        from toolfold.execenv._child import Streams, default_shell
        from toolfold.execenv._errors import ExecStartError
        from toolfold.execenv._pipes import PipeReader
        from toolfold.execenv._reaper import EXEC_ID_VAR, become_subreaper, new_exec_id
        from toolfold.execenv._spawn import PidfdChild

        from ._process import resume_collector

        self.old_handlers = {
            s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)
        }
        streams = Streams.open(tty=False, writable=False)
        self.reader = PipeReader(
            cast(Any, self.loop), streams.read_ends, self.capture, self._pipes_closed
        )
        # Every process of the command carries the marker, so the processes that left its
        # group are found and stopped with it (``_reaper``, as ``LocalExecEnv`` does).
        become_subreaper()
        self.exec_id = new_exec_id()
        env = dict(os.environ)
        env[EXEC_ID_VAR] = self.exec_id
        shell = default_shell()
        resume_collector()  # start-up is over (_entry.main paused the collector)
        try:
            self.popen = subprocess.Popen(
                [shell, "-c", self.command],
                stdin=streams.child_stdin,
                stdout=streams.child_stdout,
                stderr=streams.child_stderr,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            self.reader.close()
            raise ExecStartError(
                f"cannot start {shell!r} -c {self.command[:80]!r} (cwd=None): "
                f"{exc.strerror or exc}; check that the shell exists and cwd is a directory"
            ) from exc
        finally:
            streams.close_child_ends()
        self.child = PidfdChild(cast(Any, self.loop), self.popen, self)
        self.reader.start()

    def process_exited(self) -> None:
        """``PidfdChild``'s callback: the shell exited."""
        self.exited = True

    def _pipes_closed(self) -> None:
        self.closed = True

    def _terminate(self) -> None:
        # The group and the processes that left it: found while the shell lives (it
        # is reaped only by popen.wait() in reap(), so its pid cannot be reused meanwhile).
        from toolfold.execenv._reaper import terminate_command

        self.killed_at = self.clock()
        pid = self.popen.pid
        self.escaped = terminate_command(pid, self.exec_id, None if self.exited else pid)

    def wait(self) -> None:
        """Turn the loop until the shell exited and its pipes closed: checkpoints, lease
        renewals and status lines on their schedules; a signal, a failed capture or what
        the shell left holding the pipes stops the command (SIGTERM, then SIGKILL after
        the grace); a second signal stops waiting."""
        from toolfold.execenv._reaper import (
            DEFAULT_EXIT_GRACE,
            DEFAULT_KILL_GRACE,
            kill_command,
        )
        from toolfold.storage import StorageError

        from ._view import PLAIN_STATUS_INTERVAL

        clock, planner, ttl = self.clock, self.planner, self.ttl
        next_beat = clock() + ttl / 3
        next_status = clock() + PLAIN_STATUS_INTERVAL
        exited_at: float | None = None
        seen = 0
        try:
            while not (self.exited and self.closed):
                if len(self.signalled) >= 2:
                    self.interrupted = True
                    break
                if self.signalled and self.killed_at is None:
                    self.cancelled = True
                    self._terminate()
                if self.failures and self.killed_at is None:
                    self._terminate()  # the output cannot be kept: stop the command
                if self.exited and exited_at is None:
                    exited_at = clock()
                if (
                    exited_at is not None
                    and clock() - exited_at >= DEFAULT_EXIT_GRACE
                    and self.killed_at is None
                ):
                    # What the shell left running still holds the pipes: stop it.
                    self.background = True
                    self._terminate()
                if (
                    self.killed_at is not None
                    and self.sigkilled_at is None
                    and clock() - self.killed_at >= DEFAULT_KILL_GRACE
                ):
                    self.escaped = kill_command(self.popen.pid, self.exec_id, self.escaped)
                    self.sigkilled_at = clock()
                if (
                    self.sigkilled_at is not None
                    and self.exited
                    and clock() - self.sigkilled_at >= 1.0
                ):
                    # Something still holds the pipes a moment after SIGKILL: read what is
                    # buffered so far, then close them regardless (as LocalExecEnv does).
                    break
                now = clock()
                wait = min(next_beat, next_status) - now
                if planner.source.dirty:
                    wait = min(wait, planner.next_due())
                if exited_at is not None or self.killed_at is not None:
                    wait = min(wait, 0.05)
                self.loop.run_once(max(0.0, wait))
                now = clock()
                if planner.due():
                    try:
                        self.fenced_commit(planner.plan())
                    except (StorageError, OSError):
                        planner.lost()
                if now >= next_beat:
                    next_beat = now + ttl / 3
                    with contextlib.suppress(StorageError, OSError):
                        self.fenced_commit(self.lease.renew_writes())
                if now >= next_status:
                    next_status = now + PLAIN_STATUS_INTERVAL
                    if self.watcher.updates != seen:
                        seen = self.watcher.updates
                        print(f"toolfold: {self.watcher.status()}", file=sys.stderr, flush=True)
        finally:
            for s, handler in self.old_handlers.items():
                signal.signal(s, handler)

    def reap(self) -> int:
        """Stop what the command left (SIGKILL if it was stopped or interrupted), close
        the pipes and the loop, reap the shell; its return code."""
        from toolfold.execenv._reaper import (
            command_processes,
            kill_command,
            reap_exited,
            reap_killed,
            signal_all,
        )

        if self.interrupted or not self.exited:
            self.escaped = kill_command(self.popen.pid, self.exec_id, self.escaped)
        self.reader.close()
        self.child.close()
        returncode: int = self.popen.wait()
        left = command_processes(self.exec_id, None)
        if self.killed_at is not None or self.interrupted:
            signal_all(left, signal.SIGKILL)
            reap_killed(left | self.escaped)
        else:
            reap_exited(left)  # left running on purpose (output redirected): reaped later
        return returncode

    def settle(self, returncode: int) -> tuple[Any, Any]:
        """The bash tool's end of the output, the result, and the settlement (the last
        checkpoint, the entry, the retirement, the settled run record, the lease's
        tombstone) in one transaction; the result's message and the result."""
        from toolfold.durability import result_entry, settlement_writes
        from toolfold.execenv import ShellExecResult
        from toolfold.harness._result import (
            CANCELLED_MARKER,
            INTERRUPTION_MARKER,
            Outcome,
            ToolResult,
            describe_call,
            error_text,
        )
        from toolfold.history import settled_record
        from toolfold.storage import StorageError, ephemeral_scope
        from toolfold.tools._bash_output import finish_output

        final = self.capture.finish_on()
        self.loop.close()
        killed = self.cancelled or self.interrupted
        result = ShellExecResult.from_view(
            final,
            exit_code=None if killed or returncode < 0 else returncode,
            timed_out=False,
            cancelled=killed,
            background_killed=self.background,
        )
        failure = self.capture.failure
        error = finish_output(self.out, result, timeout=None) if failure is None else None
        outcome: Outcome
        notice: str | None
        if failure is not None:
            outcome, notice = "error", error_text(failure)
        elif self.interrupted:
            outcome, notice = "interrupted", INTERRUPTION_MARKER
        elif self.cancelled:
            outcome, notice = "cancelled", CANCELLED_MARKER
        elif error is not None:
            outcome, notice = "error", error
        else:
            outcome, notice = "ok", None
        state = self.out.settle(notice)
        self.publisher.force()  # the final publication
        tool_result = ToolResult.from_state(
            state, tool_call_id=self.call_id, tool_name="bash", outcome=outcome
        )
        message = tool_result.to_message().to_json()
        run_id, planner = self.run_id, self.planner
        try:
            if planner.stats.batches or planner.stats.failed:
                self.fenced_commit(planner.plan())  # the forced terminal write
            planner.fence()
            entry = result_entry(
                message,
                operation_id=run_id,
                run_id=run_id,
                turn_id="turn-1",
                what=describe_call(self.args),
            )
            self.fenced_commit(
                settlement_writes(
                    entry,
                    retire=ephemeral_scope(run_id),
                    with_writes=[settled_record(self.call_id, self.record, state)],
                    lease=self.lease,
                )
            )
        except StorageError as exc:
            from ._errors import StoreWriteError
            from ._run_result import unrecorded_end

            raise StoreWriteError(
                unrecorded_end(self.spec, self.session_name, self.call_id, exc)
            ) from exc
        finally:
            self.file.close()
        return message, tool_result

    def report(self, message: Any, tool_result: Any) -> int:
        """Print the result and the summary line; the exit status."""
        from ._run_result import exit_status, print_result, print_summary

        print_result(message, as_json=False)
        status = exit_status(tool_result, self.signalled[0] if self.signalled else None)
        print_summary(self.watcher, message, status, self.spec, self.session_name, self.call_id)
        return status
