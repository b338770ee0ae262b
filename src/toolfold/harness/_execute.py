"""``execute_tool_call`` (one call's whole lifecycle) and ``Harness`` (a run of calls)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from toolfold.durability import Durability
from toolfold.execenv import AdaptivePublisher, Clock
from toolfold.output import OpStream, OutputPolicy, ToolOutput
from toolfold.storage import Session

from ._bus import EventBus
from ._context import ToolContext
from ._durable_hooks import DurableHooks, resume
from ._errors import ToolDefinitionError, ToolError
from ._hooks import CallInfo, ExecutionHooks, ToolCall
from ._result import CANCELLED_MARKER, INTERRUPTION_MARKER, Outcome, ToolResult
from ._tools import Tool
from .events import RunEnd, RunStart, ToolEnd, ToolSettled, ToolStart, ToolUpdate

MAX_NOTICE_CHARS = 4000
"""Error texts appended to a result are cut to this many characters (a traceback-sized
message must not crowd out the output it explains)."""

DEFAULT_CANCEL_GRACE = 5.0
"""Seconds a tool gets to stop on its own after its ``cancel`` event is set, before
its task is cancelled."""


@dataclass(frozen=True)
class Pacing:
    """The live publisher's policy (the execution environment's, by default)."""

    min_interval: float = 0.1
    target_rate: float = 100 * 1024


Body = Callable[[ToolOutput, ToolContext, asyncio.Event], Awaitable[tuple[Outcome, str | None]]]


class _Interrupted(Exception):
    """The task driving a call was cancelled while the tool ran."""


def _error_text(exc: BaseException) -> str:
    text = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
    if len(text) > MAX_NOTICE_CHARS:
        text = text[: MAX_NOTICE_CHARS - 20] + " [error text cut]"
    return text


def format_validation_error(tool_name: str, exc: ValidationError) -> str:
    """The model-visible text for arguments that do not fit a tool's params."""
    lines = [f"Invalid arguments for tool {tool_name!r}; the tool was not run:"]
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        lines.append(f"- {loc}: {err['msg']}")
    return "\n".join(lines)


def unknown_added_tools(added: Iterable[str] | None, known: Collection[str]) -> str | None:
    """The error text for ``add_tools`` names that are not tools of the loop, or ``None``."""
    missing = [name for name in added or () if name not in known]
    if not missing:
        return None
    listed = ", ".join(sorted(known)) or "(none)"
    return (
        f"add_tools named unknown tool(s) {', '.join(map(repr, missing))}; "
        f"available tools: {listed}. No tool was added."
    )


def _tool_body(
    tool: Tool[Any], tool_call_id: str, args: Any, grace: float, known: Collection[str] | None
) -> Body:
    async def body(
        sink: ToolOutput, context: ToolContext, cancel: asyncio.Event
    ) -> tuple[Outcome, str | None]:
        try:
            params = tool.params.model_validate(args)
        except ValidationError as exc:
            return "invalid_arguments", format_validation_error(tool.name, exc)
        if cancel.is_set():
            return "cancelled", CANCELLED_MARKER
        task: asyncio.Task[None] = asyncio.create_task(
            tool.execute(tool_call_id, params, cancel, sink, context),
            name=f"tool {tool.name} {tool_call_id}",
        )
        waiter = asyncio.create_task(cancel.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                # Cooperative first: bash kills its process group and publishes its
                # last bounded state when it sees `cancel`.
                await asyncio.wait({task}, timeout=grace)
                if not task.done():
                    task.cancel()
                    await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            try:
                await asyncio.wait({task})
            finally:
                raise _Interrupted from None
        finally:
            waiter.cancel()
        if task.cancelled():
            return "cancelled", CANCELLED_MARKER
        failure = task.exception()
        if failure is not None:
            if cancel.is_set():
                return "cancelled", _error_text(failure) + "\n" + CANCELLED_MARKER
            return "error", _error_text(failure)
        if cancel.is_set():
            return "cancelled", CANCELLED_MARKER
        failure = sink.check_bounds()
        if failure is not None:
            return "error", _error_text(failure)
        if known is not None:
            # Checked before settlement, so the transcript and the model see the same
            # error; a loop would otherwise have nothing to expose next turn.
            unknown = unknown_added_tools(sink.snapshot().get("added_tools"), known)
            if unknown is not None:
                return "error", unknown
        return "ok", None

    return body


async def _drive(
    *,
    name: str,
    policy: OutputPolicy,
    body: Body,
    call: CallInfo,
    bus: EventBus,
    context: ToolContext | None,
    cancel: asyncio.Event | None,
    hooks: ExecutionHooks | None,
    clock: Clock | None,
    pacing: Pacing,
) -> ToolResult:
    hooks = hooks if hooks is not None else ExecutionHooks()
    ctx = (context if context is not None else ToolContext()).for_call(
        run_id=call.run_id, turn_id=call.turn_id, tool_call_id=call.tool_call_id
    )
    cancel = cancel if cancel is not None else asyncio.Event()
    ids = (call.run_id, call.turn_id, call.tool_call_id)
    bus.publish(ToolStart(*ids, name, call.args))
    ended = False
    unrebase: Callable[[], None] | None = None
    try:
        sink = ToolOutput(policy, seed=await hooks.seed_for(call))
        live: OpStream = sink.open_stream()

        def produce() -> tuple[list[Any], int] | None:
            ops = live.take()
            return (ops, live.last_take_bytes) if ops else None

        def consume(ops: list[Any]) -> None:
            bus.publish(ToolUpdate(*ids, ops))

        publisher: AdaptivePublisher[list[Any]] = AdaptivePublisher(
            produce=produce,
            consume=consume,
            min_interval=pacing.min_interval,
            target_rate=pacing.target_rate,
            clock=clock,
        )
        unlisten = sink.on_change(publisher.mark_dirty)
        publisher.mark_dirty()  # the base batch goes out right after tool_start

        def rebase() -> None:
            # A listener attached mid-run never saw this call's base: send one.
            if not live.closed:
                live.rebase()
                publisher.mark_dirty()

        unrebase = bus.rebase_on_attach(call.tool_call_id, rebase)
        interrupted = False
        try:
            ctx = await hooks.on_sink_created(call, sink, ctx)
            outcome, notice = await body(sink, ctx, cancel)
        except (_Interrupted, asyncio.CancelledError):
            # Interrupted while the tool ran or while a hook prepared it: settle what
            # was written with the marker, emit the end, then re-raise below.
            interrupted = True
            outcome, notice = "interrupted", INTERRUPTION_MARKER
        state = sink.settle(notice)
        unlisten()
        # Forced final publication; cancels the trailing timer, so nothing follows tool_end.
        await publisher.finish()
        live.close()
        result = ToolResult.from_state(
            state, tool_call_id=call.tool_call_id, tool_name=name, outcome=outcome
        )
        await hooks.before_settle(call, sink, result)
        bus.publish(ToolEnd(*ids, is_error=result.is_error))
        ended = True
        bus.publish(ToolSettled(*ids, message=result.to_message().to_json()))
    finally:
        if unrebase is not None:
            unrebase()
        if not ended and not bus.closed:
            bus.publish(ToolEnd(*ids, is_error=True))
    if interrupted:
        raise asyncio.CancelledError
    return result


async def execute_tool_call(
    tool: Tool[Any],
    tool_call_id: str,
    args: Any,
    *,
    run_id: str,
    turn_id: str,
    bus: EventBus,
    context: ToolContext | None = None,
    cancel: asyncio.Event | None = None,
    hooks: ExecutionHooks | None = None,
    durability: Durability | None = None,
    known_tools: Collection[str] | None = None,
    cancel_grace: float = DEFAULT_CANCEL_GRACE,
    clock: Clock | None = None,
    pacing: Pacing | None = None,
) -> ToolResult:
    """Run one tool call end to end and return its settled result.

    Emits ``ToolStart`` (identity only), ``ToolUpdate``s (the first is a base batch,
    paced by the adaptive publisher), ``ToolEnd(is_error)`` and ``ToolSettled``.

    - Invalid ``args`` → an error result naming the validation errors; the tool does
      not run.
    - The tool raises → ``is_error``; the error text is appended to what it wrote.
    - ``cancel`` is set → the tool gets ``cancel_grace`` seconds to stop, then its
      task is cancelled; the partial output is kept with ``CANCELLED_MARKER``.
    - The task running this function is cancelled (interruption) → the partial
      output is kept with ``INTERRUPTION_MARKER``, the events are still emitted,
      then ``CancelledError`` propagates.
    - ``terminate(True)`` before a raise is honoured.
    - ``known_tools`` given (the loop's tool names) → a call whose ``add_tools``
      names a tool not in it settles as an error naming that tool.

    ``durability=Durability(session)`` makes this one call durable on its own (for a
    loop that runs tools a call at a time, outside ``Harness.run``): the call is
    recorded as an operation of one call before the tool runs, its output is
    checkpointed, memos work, and the settlement writes its ``ToolResultMessage``
    and retires the operation's scope; ``Harness.resume()`` (``toolfold resume``)
    settles it after a crash. It replaces ``hooks`` (pass one or the other).
    """
    call = CallInfo(run_id, turn_id, tool_call_id, tool.name, args, tool.replay_safe)
    if durability is not None:
        if hooks is not None:
            raise ToolDefinitionError(
                "pass either durability= or hooks= to execute_tool_call, not both; for "
                "both, subclass toolfold.harness.DurableHooks and call its start_call()"
            )
        durable = DurableHooks(durability)
        await durable.start_call(call)
        hooks = durable
    return await _drive(
        name=tool.name,
        policy=tool.output,
        body=_tool_body(tool, tool_call_id, args, cancel_grace, known_tools),
        call=call,
        bus=bus,
        context=context,
        cancel=cancel,
        hooks=hooks,
        clock=clock,
        pacing=pacing if pacing is not None else Pacing(),
    )


class Harness:
    """Runs the tool calls of one run concurrently, owns the event bus, and settles
    each call into a ``ToolResult`` (``.to_message()`` is its transcript entry).

    One tool's failure or slowness never blocks another's events: each call has its
    own task, sink and publisher, and publishing never waits on subscribers.
    """

    def __init__(
        self,
        tools: Iterable[Tool[Any]],
        *,
        context: ToolContext | None = None,
        bus: EventBus | None = None,
        hooks: ExecutionHooks | None = None,
        lane: str = "default",
        cancel_grace: float = DEFAULT_CANCEL_GRACE,
        clock: Clock | None = None,
        pacing: Pacing | None = None,
        session: Session | None = None,
    ) -> None:
        self.tools: dict[str, Tool[Any]] = {}
        for t in tools:
            if t.name in self.tools:
                raise ToolDefinitionError(
                    f"two tools are named {t.name!r}; tool names must be unique in a harness"
                )
            self.tools[t.name] = t
        self.context = context if context is not None else ToolContext()
        self.bus = bus if bus is not None else EventBus()
        if session is not None:
            # Durable output (docs/durability.md): checkpoints, memos, settlement, resume.
            if hooks is not None:
                raise ToolDefinitionError(
                    "pass either session= (durable output) or hooks=, not both; for both, "
                    "subclass toolfold.harness.DurableHooks"
                )
            hooks = DurableHooks(Durability(session))
        self.hooks = hooks
        self.lane = lane
        self.cancel_grace = cancel_grace
        self.clock = clock
        self.pacing = pacing if pacing is not None else Pacing()

    async def resume(self) -> list[ToolResult]:
        """Finish every operation a crash left unsettled in the durable session:
        replay-safe calls re-run seeded from their last memo checkpoint, the others
        settled from their last checkpoint with ``INTERRUPTION_MARKER``."""
        return await resume(self)

    def definitions(self) -> list[dict[str, Any]]:
        """The tool list for the model (name, description, JSON schema)."""
        return [t.definition() for t in self.tools.values()]

    async def call(
        self, call: ToolCall, *, run_id: str, turn_id: str, cancel: asyncio.Event | None = None
    ) -> ToolResult:
        """Run one call (an unknown tool name settles as an error without running)."""
        tool = self.tools.get(call.name)
        if tool is not None:
            return await execute_tool_call(
                tool,
                call.id,
                call.args,
                run_id=run_id,
                turn_id=turn_id,
                bus=self.bus,
                context=self.context,
                cancel=cancel,
                hooks=self.hooks,
                known_tools=self.tools,
                cancel_grace=self.cancel_grace,
                clock=self.clock,
                pacing=self.pacing,
            )
        known = ", ".join(sorted(self.tools)) or "(none)"
        notice = f"Unknown tool {call.name!r}; available tools: {known}. The call was not run."

        async def unknown(
            sink: ToolOutput, context: ToolContext, cancel: asyncio.Event
        ) -> tuple[Outcome, str | None]:
            return "unknown_tool", notice

        return await _drive(
            name=call.name,
            policy=OutputPolicy(),
            body=unknown,
            call=CallInfo(run_id, turn_id, call.id, call.name, call.args, False),
            bus=self.bus,
            context=self.context,
            cancel=cancel,
            hooks=self.hooks,
            clock=self.clock,
            pacing=self.pacing,
        )

    async def run(
        self,
        calls: Sequence[ToolCall],
        *,
        run_id: str | None = None,
        turn_id: str = "turn-1",
        cancel: asyncio.Event | None = None,
    ) -> list[ToolResult]:
        """Run ``calls`` concurrently between ``RunStart`` and ``RunEnd``; results come
        back in call order. ``cancel`` cancels every call of the run."""
        run_id = run_id if run_id is not None else f"run-{uuid.uuid4().hex[:12]}"
        ids = [c.id for c in calls]
        if len(set(ids)) != len(ids):
            raise ToolDefinitionError(f"tool call ids must be unique within a run, got {ids!r}")
        self.bus.publish(RunStart(run_id, self.lane))
        try:
            if self.hooks is not None:
                await self.hooks.on_run_start(run_id, calls, turn_id=turn_id)
            async with asyncio.TaskGroup() as group:
                tasks = [
                    group.create_task(self.call(c, run_id=run_id, turn_id=turn_id, cancel=cancel))
                    for c in calls
                ]
            if self.hooks is not None:
                await self.hooks.on_run_end(run_id)
        finally:
            if not self.bus.closed:
                self.bus.publish(RunEnd(run_id))
        return [t.result() for t in tasks]
