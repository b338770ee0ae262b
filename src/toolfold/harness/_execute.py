"""``execute_tool_call`` (one call's whole lifecycle) and ``Harness`` (a run of calls)."""

from __future__ import annotations

import asyncio
import inspect
import sys
import uuid
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from toolfold import _otel
from toolfold.chord import JSONValueError, check_json, describe
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
from ._tools import EXECUTE_ARGS, Tool
from ._tracing import record_call, settle_span, time_first_output, tool_span
from .events import RunEnd, RunStart, ToolEnd, ToolSettled, ToolStart, ToolUpdate

if TYPE_CHECKING:
    from pydantic import ValidationError

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


def _validation_error(exc: Exception) -> ValidationError | None:
    """``exc`` when it is pydantic's ``ValidationError``, else ``None``. Looked up in
    ``sys.modules`` rather than imported: a params class that raised one has imported
    pydantic already, and one that did not (the plain ``bash`` params) must not pay for
    it."""
    core = sys.modules.get("pydantic_core")
    error_type = getattr(core, "ValidationError", None)
    if error_type is not None and isinstance(exc, error_type):
        return cast("ValidationError", exc)
    return None


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


def args_problem(tool_name: str, args: Any) -> str | None:
    """The model-visible text when ``args`` holds a value no store or replica can hold (an
    integer beyond ±(2**53 - 1), NaN, a lone surrogate, ...), or ``None`` when they are fine.

    Such arguments are refused before anything records them: the call settles as
    ``invalid_arguments`` and the other calls of the batch run as usual.
    """
    try:
        check_json(args, ["args"])
    except JSONValueError as exc:
        return f"Invalid arguments for tool {tool_name!r}; the tool was not run:\n- {exc}"
    return None


def _valid_unicode(text: str) -> bool:
    try:
        check_json(text)
    except JSONValueError:
        return False
    return True


def call_problem(call: ToolCall, earlier_ids: set[str]) -> str | None:
    """Why a call cannot even be recorded (its id or name), or ``None``.

    The store and every replica key a call by its id, so an id must be a non-empty str of
    valid Unicode without NUL (the store's keys), unique within its run.
    """
    cid, name = call.id, call.name
    if type(cid) is not str or not cid:
        return f"tool call id {describe(cid)} is not a non-empty str; the call was not run"
    if "\x00" in cid:
        return (
            f"tool call id {cid!r} contains a NUL character at index {cid.index(chr(0))}, which "
            "no store can key; the call was not run"
        )
    if not _valid_unicode(cid):
        return (
            f"tool call id {cid!r} holds a lone surrogate (not valid Unicode); the call was not run"
        )
    if cid in earlier_ids:
        return (
            f"tool call id {cid!r} is used by an earlier call of this run; ids must be unique "
            "within a run, so the call was not run"
        )
    if type(name) is not str or not _valid_unicode(name):
        return f"tool name {describe(name)} is not a str of valid Unicode; the call was not run"
    return None


def refused_result(call: ToolCall, notice: str) -> ToolResult:
    """The error result of a call that cannot be recorded: nothing runs, nothing is stored
    and no event is published (every subscriber keys calls by the id it cannot hold)."""
    sink = ToolOutput()
    state = sink.settle(notice)
    name = call.name if type(call.name) is str and _valid_unicode(call.name) else "?"
    return ToolResult.from_state(state, tool_call_id=call.id, tool_name=name, outcome="error")


def _start(tool: Tool[Any], args: tuple[Any, ...]) -> Any:
    """``tool.execute(*args)``: a coroutine, or the exception saying why it cannot be one."""
    try:
        coro = tool.execute(*args)
    except Exception as exc:  # a signature Python could not check when the tool was defined
        return exc
    if not inspect.iscoroutine(coro):
        return TypeError(f"execute returned {describe(coro)}, not a coroutine")
    return coro


def _signature_error(tool: Tool[Any], exc: BaseException) -> str:
    return _error_text(
        ToolError(
            f"tool {tool.name!r} could not be started ({type(exc).__name__}: {exc}); its execute "
            f"must be 'async def execute({', '.join(EXECUTE_ARGS)}) -> None'"
        )
    )


def _returned_error(tool: Tool[Any], value: Any) -> str:
    return _error_text(
        ToolError(
            f"tool {tool.name!r} returned {describe(value)} instead of None; its result is "
            "what it writes to its sink (out.write(text), out.details[...] = ...), so the "
            "returned value was not used. Write it with out.write() and return nothing"
        )
    )


def _tool_body(
    tool: Tool[Any], tool_call_id: str, args: Any, grace: float, known: Collection[str] | None
) -> Body:
    async def body(
        sink: ToolOutput, context: ToolContext, cancel: asyncio.Event
    ) -> tuple[Outcome, str | None]:
        try:
            params = tool.params.model_validate(args)
        except Exception as exc:
            invalid = _validation_error(exc)
            if invalid is None:
                raise
            return "invalid_arguments", format_validation_error(tool.name, invalid)
        if cancel.is_set():
            return "cancelled", CANCELLED_MARKER
        started = _start(tool, (tool_call_id, params, cancel, sink, context))
        if isinstance(started, BaseException):
            return "error", _signature_error(tool, started)
        task: asyncio.Task[Any] = asyncio.create_task(
            started, name=f"tool {tool.name} {tool_call_id}"
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
        returned = task.result()
        if returned is not None:
            return "error", _returned_error(tool, returned)
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
    tracer = _otel.tracer()
    meters = _otel.meters()
    # Not awaited yet: the span (when one is wanted) opens first, in this task, so it is
    # a child of the caller's current span and the parent of whatever the tool opens.
    run = _run(
        meters=meters,
        name=name,
        policy=policy,
        body=body,
        call=call,
        bus=bus,
        context=context,
        cancel=cancel,
        hooks=hooks,
        clock=clock,
        pacing=pacing,
    )
    if tracer is None:
        result, interrupted = await run
    else:
        with tool_span(tracer, name, call.tool_call_id) as span:
            result, interrupted = await run
            settle_span(span, result, policy)
    if meters is not None:
        record_call(meters, name, result)
    if interrupted:
        raise asyncio.CancelledError
    return result


async def _run(
    *,
    meters: _otel.Meters | None,
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
        except (_Interrupted, asyncio.CancelledError):
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
            return await _drive(
                name=call.name,
                policy=tool_def.output if tool_def is not None else OutputPolicy(),
                body=refuse,
                # The arguments are not recorded anywhere: no store could hold them.
                call=CallInfo(run_id, turn_id, call.id, call.name, None, False),
                bus=self.bus,
                context=self.context,
                cancel=cancel,
                hooks=self.hooks,
                clock=self.clock,
                pacing=self.pacing,
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
            async with asyncio.TaskGroup() as group:
                tasks = {
                    i: group.create_task(
                        self.call(c, run_id=run_id, turn_id=turn_id, cancel=cancel)
                    )
                    for i, c in enumerate(calls)
                    if i not in refused
                }
            if self.hooks is not None:
                await self.hooks.on_run_end(run_id)
        finally:
            if not self.bus.closed:
                self.bus.publish(RunEnd(run_id))
        return [refused[i] if i in refused else tasks[i].result() for i in range(len(calls))]
