"""``execute_tool_call`` (one call's whole lifecycle) and ``Harness`` (a run of calls)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from toolfold import _otel
from toolfold.durability import Durability
from toolfold.execenv import AdaptivePublisher, Clock
from toolfold.output import OpStream, OutputPolicy, ToolOutput
from toolfold.storage import Session

from ._bus import EventBus
from ._call_checks import args_problem, call_problem, refused_result
from ._context import ToolContext
from ._durable_hooks import DurableHooks, resume
from ._errors import ToolDefinitionError
from ._hooks import CallInfo, ExecutionHooks, ToolCall
from ._result import INTERRUPTION_MARKER, Outcome, ToolResult
from ._tool_body import DEFAULT_CANCEL_GRACE, Body, Interrupted, tool_body
from ._tools import Tool
from ._tracing import record_call, record_failure, settle_span, time_first_output, tool_span
from .events import RunEnd, RunStart, ToolEnd, ToolSettled, ToolStart, ToolUpdate


@dataclass(frozen=True)
class Pacing:
    """The live publisher's policy (the execution environment's, by default)."""

    min_interval: float = 0.1
    target_rate: float = 100 * 1024


async def _observed(
    start: Callable[[_otel.Meters | None], Coroutine[Any, Any, tuple[ToolResult, bool]]],
    *,
    name: str,
    tool_call_id: str,
    policy: OutputPolicy,
) -> ToolResult:
    """Run a call's lifecycle (``start(meters)`` makes its ``_run``) inside its
    ``execute_tool`` span when a tracer is configured, count the call when meters are,
    and re-raise ``CancelledError`` once an interrupted call is described."""
    tracer = _otel.tracer()
    meters = _otel.meters()
    started = time.monotonic() if meters is not None else 0.0
    # Not awaited yet: the span (when one is wanted) opens first, in this task, so it is
    # a child of the caller's current span and the parent of whatever the tool opens.
    run = start(meters)
    try:
        if tracer is None:
            result, interrupted = await run
        else:
            with tool_span(tracer, name, tool_call_id) as span:
                result, interrupted = await run
                settle_span(span, result, policy)
    except Exception as exc:  # the harness itself failed (a store, a hook): no result
        if meters is not None:
            record_failure(meters, name, exc, time.monotonic() - started)
        raise
    if meters is not None:
        record_call(meters, name, result, time.monotonic() - started)
    if interrupted:
        raise asyncio.CancelledError
    return result


async def _run(
    meters: _otel.Meters | None,
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
) -> tuple[ToolResult, bool]:
    """The call's lifecycle; returns its result and whether the driving task was
    cancelled (the caller re-raises after describing the call)."""
    hooks = hooks if hooks is not None else ExecutionHooks()
    ctx = (context if context is not None else ToolContext()).for_call(
        run_id=call.run_id, turn_id=call.turn_id, tool_call_id=call.tool_call_id, tool_name=name
    )
    cancel = cancel if cancel is not None else asyncio.Event()
    followed: list[tuple[str, str]] = []  # commands that outlive the call
    ctx = dataclasses.replace(ctx, on_background=lambda h, c: followed.append((h, c)))
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
        unwatch = time_first_output(meters, name, sink) if meters is not None else None

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
        except (Interrupted, asyncio.CancelledError):
            # Interrupted while the tool ran or while a hook prepared it: settle what
            # was written with the marker, emit the end, then re-raise below.
            interrupted = True
            outcome, notice = "interrupted", INTERRUPTION_MARKER
        state = sink.settle(notice)
        unlisten()
        if unwatch is not None:
            unwatch()
        # Forced final publication; cancels the trailing timer, so nothing follows tool_end.
        await publisher.finish()
        live.close()
        result = ToolResult.from_state(
            state, tool_call_id=call.tool_call_id, tool_name=name, outcome=outcome, kind=call.kind
        )
        await hooks.before_settle(call, sink, result)
        bus.publish(ToolEnd(*ids, is_error=result.is_error))
        ended = True
        bus.publish(ToolSettled(*ids, message=result.to_message().to_json()))
        for handle, command in followed:
            # Its further output: a call of its own, from now on (``_background_call``,
            # imported here: a call whose command ends with it never needs it).
            from ._background_call import follow_later

            follow_later(
                call,
                ctx,
                hooks,
                lambda info, body: _observed(
                    partial(
                        _run,
                        name=info.tool_name,
                        policy=policy,
                        body=body,
                        call=info,
                        bus=bus,
                        context=context,
                        cancel=None,
                        hooks=hooks,
                        clock=clock,
                        pacing=pacing,
                    ),
                    name=info.tool_name,
                    tool_call_id=info.tool_call_id,
                    policy=policy,
                ),
                handle,
                command,
            )
    finally:
        if unrebase is not None:
            unrebase()
        if not ended and not bus.closed:
            bus.publish(ToolEnd(*ids, is_error=True))
    return result, interrupted


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
    start = partial(
        _run,
        name=tool.name,
        policy=tool.output,
        body=tool_body(tool, tool_call_id, args, cancel_grace, known_tools),
        call=call,
        bus=bus,
        context=context,
        cancel=cancel,
        hooks=hooks,
        clock=clock,
        pacing=pacing if pacing is not None else Pacing(),
    )
    return await _observed(start, name=tool.name, tool_call_id=tool_call_id, policy=tool.output)


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

    async def resume(
        self,
        *,
        notes: Mapping[str, str] | None = None,
        cancels: Mapping[str, asyncio.Event] | None = None,
    ) -> list[ToolResult]:
        """Finish every operation a crash left unsettled in the durable session:
        replay-safe calls re-run seeded from their last memo checkpoint (setting
        ``cancels[tool_call_id]`` cancels one), the others settled from their last
        checkpoint with ``INTERRUPTION_MARKER`` (preceded by ``notes[tool_call_id]``
        when given: what became of a background command)."""
        return await resume(self, notes=notes, cancels=cancels)

    def definitions(self) -> list[dict[str, Any]]:
        """The tool list for the model (name, description, JSON schema)."""
        return [t.definition() for t in self.tools.values()]

    async def call(
        self, call: ToolCall, *, run_id: str, turn_id: str, cancel: asyncio.Event | None = None
    ) -> ToolResult:
        """Run one call (an unknown tool name settles as an error without running).

        A call whose id or name cannot be recorded settles as an error without events;
        arguments no store or replica can hold settle as ``invalid_arguments``.
        """
        problem = call_problem(call, set())
        if problem is not None:
            return refused_result(call, problem)
        bad_args = args_problem(call.name, call.args)
        if bad_args is not None:

            async def refuse(
                sink: ToolOutput, context: ToolContext, cancel: asyncio.Event
            ) -> tuple[Outcome, str | None]:
                return "invalid_arguments", bad_args

            tool_def = self.tools.get(call.name)
            return await self._settle_untooled(
                call.name,
                tool_def.output if tool_def is not None else OutputPolicy(),
                refuse,
                # The arguments are not recorded anywhere: no store could hold them.
                CallInfo(run_id, turn_id, call.id, call.name, None, False),
                cancel,
            )
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

        return await self._settle_untooled(
            call.name,
            OutputPolicy(),
            unknown,
            CallInfo(run_id, turn_id, call.id, call.name, call.args, False),
            cancel,
        )

    async def _settle_untooled(
        self,
        name: str,
        policy: OutputPolicy,
        body: Body,
        call: CallInfo,
        cancel: asyncio.Event | None,
    ) -> ToolResult:
        """Settle a call whose ``body`` only says why no tool ran (its events are those
        of any call)."""
        start = partial(
            _run,
            name=name,
            policy=policy,
            body=body,
            call=call,
            bus=self.bus,
            context=self.context,
            cancel=cancel,
            hooks=self.hooks,
            clock=self.clock,
            pacing=self.pacing,
        )
        return await _observed(start, name=name, tool_call_id=call.tool_call_id, policy=policy)

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
        # The model controls ids, names and arguments: one call the store cannot hold (or a
        # repeated id) becomes that call's error result, never the whole run's exception.
        refused: dict[int, ToolResult] = {}
        recorded: list[ToolCall] = []
        seen: set[str] = set()
        for i, c in enumerate(calls):
            problem = call_problem(c, seen)
            if problem is not None:
                refused[i] = refused_result(c, problem)
                continue
            seen.add(c.id)
            # Arguments no store can hold are not recorded; the call settles as invalid.
            storable = args_problem(c.name, c.args) is None
            recorded.append(c if storable else ToolCall(c.id, c.name, None))
        self.bus.publish(RunStart(run_id, self.lane))
        try:
            if self.hooks is not None:
                await self.hooks.on_run_start(run_id, recorded, turn_id=turn_id)
            results: dict[int, ToolResult] = {}
            if len(calls) - len(refused) == 1:
                # One call (an MCP server's every run): awaited here, without a task and
                # a task group around it; its failure is raised as the group's would be.
                [(i, c)] = [(i, c) for i, c in enumerate(calls) if i not in refused]
                try:
                    results[i] = await self.call(c, run_id=run_id, turn_id=turn_id, cancel=cancel)
                except Exception as exc:
                    raise ExceptionGroup("unhandled errors in a TaskGroup", [exc]) from None
            else:
                async with asyncio.TaskGroup() as group:
                    tasks = {
                        i: group.create_task(
                            self.call(c, run_id=run_id, turn_id=turn_id, cancel=cancel)
                        )
                        for i, c in enumerate(calls)
                        if i not in refused
                    }
                results = {i: task.result() for i, task in tasks.items()}
            if self.hooks is not None:
                await self.hooks.on_run_end(run_id)
        finally:
            if not self.bus.closed:
                self.bus.publish(RunEnd(run_id))
        return [refused[i] if i in refused else results[i] for i in range(len(calls))]
