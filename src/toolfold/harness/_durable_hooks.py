"""``DurableHooks``: the durability layer plugged into the call lifecycle, and ``resume``.

The durable machinery (streams, recovery, memos, settlement) is ``toolfold.durability``;
this module only maps the harness's lifecycle (run start, sink created, before settle)
onto it, and finishes what a crash left unsettled by running calls through a harness.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, cast

from toolfold import _json, _otel
from toolfold._otel import AttrValue
from toolfold.durability import (
    CallRecord,
    Durability,
    DurabilityError,
    DurableInvocation,
    DurableOperation,
    LeaseHeldError,
    default_host_id,
    operation_call,
    pending_tool_output,
    result_entry,
)
from toolfold.output import OutputPolicy, ToolOutput, ToolOutputState, output_text, text_blocks
from toolfold.storage import Session, SessionWrite, set_value

from ._bus import EventBus
from ._context import ToolContext
from ._hooks import CallInfo, ExecutionHooks, ToolCall
from ._result import INTERRUPTION_MARKER, ToolResult, describe_call
from ._tools import Tool
from ._tracing import record_call, settle_span, tool_span
from .events import (
    RunEnd,
    RunStart,
    ToolEnd,
    ToolSettled,
    ToolStart,
    ToolUpdate,
)

if TYPE_CHECKING:
    from toolfold.durability import PendingMessage, PendingOperation

JSON = Any


class ResumeHost(Protocol):
    """What resuming needs from a harness: its tools, its bus and lane, and a way to
    run one call (``Harness`` is one)."""

    tools: dict[str, Tool[Any]]
    bus: EventBus
    lane: str

    async def call(
        self, call: ToolCall, *, run_id: str, turn_id: str, cancel: asyncio.Event | None = None
    ) -> ToolResult:
        """Run one call through the host's hooks."""
        ...


class _HostRecord(NamedTuple):
    start: tuple[SessionWrite, ...]
    settled: Callable[[ToolResult], Sequence[SessionWrite]] | None


_NO_RECORD = _HostRecord((), None)


class DurableHooks(ExecutionHooks):
    """Plugs durability into the call lifecycle (``ExecutionHooks``) of a ``Harness``.

    - run start: the operation (= the run) and its calls are recorded in the operation
      scope before any tool runs; a call run on its own (``execute_tool_call(...,
      durability=...)``) is recorded as an operation of one call by :meth:`start_call`;
    - sink created: a durable stream is opened on the sink (its own op stream and its
      own encoder), paced checkpoints follow the sink's changes, memos are attached
      to the tool's context;
    - before settle: a forced write of the final state, then the settlement
      transaction (result entry, + ``retire_scope`` with the operation's last call);
    - :meth:`resume`: every operation left unsettled in the session is finished —
      replay-safe calls re-run seeded, the others settled from their checkpoint.
    """

    def __init__(self, durability: Durability) -> None:
        self.durability = durability
        # Keyed by (run id, tool call id): the calls of one run share an operation,
        # while calls run on their own each have one, under the same run id.
        self._ops: dict[tuple[str, str], DurableOperation] = {}
        self._calls: dict[tuple[str, str], DurableInvocation] = {}
        self._seeds: dict[tuple[str, str], JSON] = {}
        self._records: dict[tuple[str, str], _HostRecord] = {}
        # Calls re-run by resume() right now (their spans say toolfold.resumed).
        self._resuming: set[tuple[str, str]] = set()
        self._notes: dict[str, str] = {}
        self._cancels: Mapping[str, asyncio.Event] = {}
        self.resumed_messages: list[JSON] = []
        """Transcript entries of the assistant messages :meth:`resume` settled."""
        self.skipped: list[LeaseHeldError] = []
        """Operations :meth:`resume` left alone: their lease is live on another host (they
        are running there), or another host took them over first."""

    @property
    def session(self) -> Session:
        """The storage session output is made durable in."""
        return self.durability.session

    def record_call(
        self,
        run_id: str,
        tool_call_id: str,
        *,
        start: Sequence[SessionWrite] = (),
        settled: Callable[[ToolResult], Sequence[SessionWrite]] | None = None,
    ) -> None:
        """Session-scope writes a host keeps about the call ``tool_call_id`` of run
        ``run_id`` (what ``toolfold run`` and ``toolfold mcp`` record: the command, the
        process, then the output's totals), committed WITH the call's own records rather
        than beside them: ``start`` in the transaction that takes the operation's lease
        and records its start (before the operation's start, when it is not leased),
        ``settled(result)`` in the settlement's. Call it before the run starts.
        """
        self._records[(run_id, tool_call_id)] = _HostRecord(tuple(start), settled)

    def _start_writes(self, run_id: str, ids: Sequence[str]) -> list[SessionWrite]:
        return [w for i in ids for w in self._records.get((run_id, i), _NO_RECORD).start]

    async def on_run_start(
        self, run_id: str, calls: Sequence[ToolCall], *, turn_id: str = ""
    ) -> None:
        records = [CallRecord(run_id, c.id, c.name, c.id, c.args, run_id, turn_id) for c in calls]
        writes = self._start_writes(run_id, [c.id for c in calls])
        self._attach(
            await self.durability.start_operation(run_id, run_id, records, with_writes=writes)
        )

    async def on_run_end(self, run_id: str) -> None:
        # Whatever a call of the run did not settle (it failed outside its tool) must not
        # keep its host record here.
        for key in [k for k in self._records if k[0] == run_id]:
            del self._records[key]

    async def start_call(self, call: CallInfo) -> str:
        """Record ``call`` as an operation of its own (a loop that runs tools one call
        at a time, outside ``Harness.run``) before it runs; returns the operation id.

        The operation id is fresh per call: calls a loop runs concurrently under one
        run id settle independently, each retiring its own scope.
        """
        operation_id = f"call-{uuid.uuid4().hex[:16]}"
        record = CallRecord(
            operation_id,
            call.tool_call_id,
            call.tool_name,
            call.tool_call_id,
            call.args,
            call.run_id,
            call.turn_id,
            {"kind": call.kind} if call.kind is not None else {},
        )
        writes = self._start_writes(call.run_id, [call.tool_call_id])
        self._attach(
            await self.durability.start_operation(
                operation_id, call.run_id, [record], with_writes=writes
            )
        )
        return operation_id

    def _attach(self, op: DurableOperation) -> None:
        for record in op.records.values():
            if record.invocation_id in op.unsettled:
                self._ops[(op.run_id, record.tool_call_id)] = op

    async def seed_for(self, call: CallInfo) -> ToolOutputState | None:
        seed = self._seeds.pop((call.run_id, call.tool_call_id), None)
        return cast("ToolOutputState | None", seed)

    async def on_sink_created(
        self, call: CallInfo, sink: ToolOutput, context: ToolContext
    ) -> ToolContext:
        op = self._ops.get((call.run_id, call.tool_call_id))
        if op is None:
            # A call whose operation was never recorded (neither Harness.run nor
            # start_call): nothing to make durable, and memos stay unavailable rather
            # than silently volatile.
            return context
        record = op.records.get(call.tool_call_id)
        if record is not None and record.turn_id != call.turn_id:
            # A record written without the turn id (a caller of on_run_start that did
            # not pass it): keep it, so a resumed call's events carry the same identity
            # as the original's.
            record.turn_id = call.turn_id
            await self.session.commit(
                [set_value(operation_call(op.operation_id, record.invocation_id), record.to_json())]
            )
        inv = op.invocation(call.tool_call_id, sink.open_stream())
        self._calls[(call.run_id, call.tool_call_id)] = inv
        sink.on_change(inv.notify)
        # The first durable batch (a base) once the call has run one checkpoint interval;
        # a call that ends sooner is written by its settlement alone.
        inv.notify()
        return context.with_memos(inv)

    async def before_settle(self, call: CallInfo, sink: ToolOutput, result: ToolResult) -> None:
        op = self._ops.pop((call.run_id, call.tool_call_id), None)
        if op is None:
            return
        inv = self._calls.pop((call.run_id, call.tool_call_id), None)
        if inv is not None:
            await inv.finish()
        message = result_entry(
            result.to_message().to_json(),
            operation_id=op.operation_id,
            run_id=call.run_id,
            turn_id=call.turn_id,
            what=describe_call(call.args),
        )
        host = self._records.pop((call.run_id, call.tool_call_id), None)
        extra = host.settled(result) if host is not None and host.settled is not None else ()
        await op.settle(call.tool_call_id, message, with_writes=extra)
        span = _otel.recording_span()
        if span is not None:  # the call's execute_tool span (docs/observability.md)
            span.set_attributes(
                _durable_attributes(
                    op, inv, resumed=(call.run_id, call.tool_call_id) in self._resuming
                )
            )

    async def resume(
        self,
        harness: ResumeHost,
        *,
        orphans_only: bool = False,
        notes: Mapping[str, str] | None = None,
        cancels: Mapping[str, asyncio.Event] | None = None,
    ) -> list[ToolResult]:
        """Finish every operation left unsettled in the session (after a crash).

        Replay-safe calls are re-executed with a sink **seeded** from the state that
        was committed with their latest memo (never from nothing after deleting the
        checkpoint: memoised work is skipped and emits nothing, so its output must
        already be in the sink). Calls that are not replay-safe are not re-run: their
        last durable state is settled as the result, with ``INTERRUPTION_MARKER``,
        ``is_error`` and outcome ``"interrupted"``. Returns the settled results.

        ``orphans_only`` (what a janitor running beside live hosts needs) takes only
        operations whose lease expired: an unleased operation, and an assistant message,
        carry no sign of whether their process still runs, so they are left to an
        explicit ``toolfold resume``.

        ``notes`` (tool call id → text) says what happened to a call that is settled
        from its checkpoint (a background command stopped after the crash): the text
        goes before the interruption marker, and into ``details["interrupted"]``.
        """
        results: list[ToolResult] = []
        self.skipped = []
        self._notes = dict(notes or {})
        self._cancels = cancels if cancels is not None else {}
        durability = self.durability
        found = await (
            durability.orphaned_operations() if orphans_only else durability.pending_operations()
        )
        for pending in found:
            try:
                op = await self.durability.claim(pending, self.durability.host or default_host_id())
            except LeaseHeldError as exc:
                # Running on another host (its lease is live), or another resumer won
                # the takeover: not ours to settle or replay.
                self.skipped.append(exc)
                continue
            results.extend(await self._resume_operation(harness, pending, op))
        if orphans_only:
            return results
        # Recovery is imported here: a call that runs and settles needs none of it.
        from toolfold.durability import pending_messages

        for message in await pending_messages(self.session):
            self.resumed_messages.append(await self._resume_message(harness, message))
        return results

    async def _resume_message(self, harness: ResumeHost, pending: PendingMessage) -> JSON:
        # Like an interrupted call: the checkpoint IS the message; subscribers see it
        # start, one base update and its end, like any message.
        from toolfold.durability import INTERRUPTED_STOP, settle_interrupted_message

        from .events import MessageEnd, MessageStart, MessageUpdate

        entry = await settle_interrupted_message(self.session, pending)
        ids = (pending.run_id, pending.turn_id, pending.message_id)
        state = {k: entry[k] for k in ("role", "content", "stop_reason", "is_error") if k in entry}
        harness.bus.publish(MessageStart(*ids))
        harness.bus.publish(MessageUpdate(*ids, [["r", state]]))
        harness.bus.publish(MessageEnd(*ids, stop_reason=INTERRUPTED_STOP, is_error=True))
        return entry

    async def _resume_operation(
        self, harness: ResumeHost, pending: PendingOperation, op: DurableOperation
    ) -> list[ToolResult]:
        run_id = pending.run_id
        self._attach(op)
        todo = [c for c in pending.calls if c.invocation_id in op.unsettled]
        harness.bus.publish(RunStart(run_id, harness.lane))
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._resume_call(harness, op, c)) for c in todo]
        finally:
            if not harness.bus.closed:
                harness.bus.publish(RunEnd(run_id))
        if not todo:
            # Every call had settled but the crash came before the retirement
            # (a call settled by an older harness without the last-call retirement).
            await op.retire()
        return [t.result() for t in tasks]

    async def _resume_call(
        self, harness: ResumeHost, op: DurableOperation, record: CallRecord
    ) -> ToolResult:
        from toolfold.durability import load_memo_seed, recover

        tool = harness.tools.get(record.tool_name)
        key = (op.run_id, record.tool_call_id)
        turn_id = record.turn_id or "turn-1"
        # A background command's output is never re-run: its command is not the call's.
        if tool is not None and tool.replay_safe and not record.extra.get("kind"):
            self._seeds[key] = await load_memo_seed(
                self.session, op.operation_id, record.invocation_id
            )
            self._resuming.add(key)
            try:
                return await harness.call(
                    ToolCall(record.tool_call_id, record.tool_name, record.args),
                    run_id=op.run_id,
                    turn_id=turn_id,
                    cancel=self._cancels.get(record.tool_call_id),
                )
            finally:
                self._resuming.discard(key)
        recovered = await recover(
            self.session, pending_tool_output(op.operation_id, record.invocation_id)
        )
        policy = tool.output if tool is not None else OutputPolicy()
        state = recovered.value if recovered is not None else ToolOutput(policy).snapshot()
        return await self._settle_interrupted(harness, op, record, turn_id, state)

    async def _settle_interrupted(
        self,
        harness: ResumeHost,
        op: DurableOperation,
        record: CallRecord,
        turn_id: str,
        state: JSON,
    ) -> ToolResult:
        tracer = _otel.tracer()
        started = time.monotonic()
        if tracer is None:
            result = await self._settle_checkpoint(harness, op, record, turn_id, state)
        else:
            # The call gets its execute_tool span here too: nothing re-runs it, but a
            # trace of the resume shows it settled from its checkpoint, interrupted.
            with tool_span(tracer, record.tool_name, record.tool_call_id) as span:
                result = await self._settle_checkpoint(harness, op, record, turn_id, state)
                settle_span(span, result, None)
                span.set_attributes(_durable_attributes(op, None, resumed=True))
        meters = _otel.meters()
        if meters is not None:  # the crashed process never counted it
            record_call(meters, record.tool_name, result, time.monotonic() - started)
        return result

    async def _settle_checkpoint(
        self,
        harness: ResumeHost,
        op: DurableOperation,
        record: CallRecord,
        turn_id: str,
        state: JSON,
    ) -> ToolResult:
        # The durable state IS the result: no sink is rebuilt around it (re-windowing a
        # state whose totals came from the source could change its text), nothing runs,
        # and nothing new is made durable — a crash during this settlement finds the
        # same checkpoint again, never one that already carries the marker.
        final = _json.loads(_json.dumps(state))
        # The marker goes after the whole text: into its last block (the tail part of a
        # head_tail text), so the joined text ends with it as a sink's would.
        last = final["content"][max(text_blocks(final), 1) - 1]
        text = output_text(final)
        sep = "\n" if text and not text.endswith("\n") else ""
        kind = record.extra.get("kind")
        kind = kind if isinstance(kind, str) else None
        note = self._notes.get(record.tool_call_id)
        if note is None and kind is not None:
            note = (
                "[The process that followed this background command ended (a crash?) before "
                "the command did, and nothing here shows it left running (it had ended, or "
                "it ran on an exec host, which stops its commands when its connection "
                "ends).]"
            )
        if note is not None:
            final["details"]["interrupted"] = note
            last["text"] = last["text"] + sep + note
            sep = "\n"
        last["text"] = last["text"] + sep + INTERRUPTION_MARKER
        ids = (op.run_id, turn_id, record.tool_call_id)
        bus = harness.bus
        bus.publish(ToolStart(*ids, record.tool_name, record.args))
        bus.publish(ToolUpdate(*ids, [["r", final]]))  # a base batch, like any first update
        result = ToolResult.from_state(
            cast("ToolOutputState", final),
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            outcome="interrupted",
            kind=kind,
        )
        message = result.to_message().to_json()
        stored = result_entry(
            message,
            operation_id=op.operation_id,
            run_id=op.run_id,
            turn_id=turn_id,
            what=describe_call(record.args),
        )
        self._ops.pop((op.run_id, record.tool_call_id), None)
        try:
            await op.settle(record.invocation_id, stored)
        finally:
            bus.publish(ToolEnd(*ids, is_error=True))
        bus.publish(ToolSettled(*ids, message=message))
        return result


def _durable_attributes(
    op: DurableOperation, inv: DurableInvocation | None, *, resumed: bool
) -> dict[str, AttrValue]:
    attributes: dict[str, AttrValue] = {
        "toolfold.operation.id": op.operation_id,
        "toolfold.resumed": resumed,
    }
    if inv is not None:
        attributes["toolfold.durable.checkpoints"] = inv.stream.stats.batches
    if op.lease is not None:
        attributes["toolfold.lease.holder"] = op.lease.owner
    return attributes


async def resume(
    harness: ResumeHost,
    *,
    orphans_only: bool = False,
    notes: Mapping[str, str] | None = None,
    cancels: Mapping[str, asyncio.Event] | None = None,
) -> list[ToolResult]:
    """Resume every unsettled operation of the durable session attached to ``harness``
    (see :meth:`DurableHooks.resume`; ``orphans_only``: only those whose lease expired;
    ``notes``: what happened to calls settled from their checkpoint; ``cancels``: the
    cancel event of each re-run call, by tool call id)."""
    hooks = getattr(harness, "hooks", None)
    if not isinstance(hooks, DurableHooks):
        raise DurabilityError(
            "resume() needs a Harness with durability attached "
            "(Harness(tools, hooks=DurableHooks(Durability(session))))"
        )
    return await hooks.resume(harness, orphans_only=orphans_only, notes=notes, cancels=cancels)
