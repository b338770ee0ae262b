"""execute_tool_call and Harness: event order, failure semantics, cancellation, concurrency."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from harness_helpers import FakeClock
from pydantic import BaseModel, Field

from toolfold.chord import apply, is_base
from toolfold.harness import (
    CANCELLED_MARKER,
    INTERRUPTION_MARKER,
    EventBus,
    ExecutionHooks,
    Harness,
    HarnessEvent,
    MemoUnavailableError,
    Pacing,
    Tool,
    ToolCall,
    ToolContext,
    ToolDefinitionError,
    ToolEnd,
    ToolError,
    ToolResult,
    ToolSettled,
    ToolStart,
    ToolUpdate,
    execute_tool_call,
    tool,
)
from toolfold.output import OutputPolicy, ToolOutput


class Empty(BaseModel):
    pass


class Echo(BaseModel):
    text: str
    times: int = Field(default=1, ge=1)


def recorder(bus: EventBus) -> list[HarnessEvent]:
    events: list[HarnessEvent] = []
    bus.add_listener(events.append)
    return events


def fold_updates(events: list[HarnessEvent], call_id: str) -> Any:
    state: Any = None
    for e in events:
        if isinstance(e, ToolUpdate) and e.tool_call_id == call_id:
            state = apply(state, copy.deepcopy(e.ops))
    return state


def check_call_shape(events: list[HarnessEvent], call_id: str) -> None:
    mine = [e for e in events if getattr(e, "tool_call_id", None) == call_id]
    assert isinstance(mine[0], ToolStart)
    assert isinstance(mine[1], ToolUpdate) and is_base(mine[1].ops)
    assert all(isinstance(e, ToolUpdate) for e in mine[1:-2])
    assert isinstance(mine[-2], ToolEnd)
    assert isinstance(mine[-1], ToolSettled)


async def run(t: Tool[Any], args: Any, **kw: Any) -> tuple[ToolResult, list[HarnessEvent]]:
    bus = EventBus()
    events = recorder(bus)
    result = await execute_tool_call(t, "c1", args, run_id="r1", turn_id="t1", bus=bus, **kw)
    return result, events


@tool(params=Echo)
async def echo(
    tool_call_id: str, params: Echo, cancel: asyncio.Event, out: ToolOutput, context: ToolContext
) -> None:
    """Echo text."""
    for _ in range(params.times):
        out.write(params.text)


async def test_events_are_start_base_updates_end_settled_and_the_fold_is_the_result() -> None:
    result, events = await run(echo, {"text": "hi\n", "times": 3})
    check_call_shape(events, "c1")
    start = events[0]
    assert isinstance(start, ToolStart)
    assert (start.tool_name, start.args) == ("echo", {"text": "hi\n", "times": 3})
    assert result.text == "hi\nhi\nhi\n" and not result.is_error and result.outcome == "ok"
    assert fold_updates(events, "c1") == result.state
    settled = events[-1]
    assert isinstance(settled, ToolSettled)
    assert settled.message["content"][0]["text"] == "hi\nhi\nhi\n"
    assert settled.message["is_error"] is False


async def test_invalid_args_are_an_error_result_and_the_tool_does_not_run() -> None:
    ran = []

    @tool(params=Echo, name="strict")
    async def strict(
        tool_call_id: str,
        params: Echo,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: strict."""
        ran.append(True)

    result, events = await run(strict, {"times": 0})
    assert ran == []
    assert result.is_error and result.outcome == "invalid_arguments"
    assert "Invalid arguments for tool 'strict'; the tool was not run:" in result.text
    assert "- text: Field required" in result.text
    assert "- times: Input should be greater than or equal to 1" in result.text
    check_call_shape(events, "c1")


async def test_a_raise_keeps_the_8kb_already_written_and_appends_the_error() -> None:
    @tool(params=Empty, name="streams_then_fails")
    async def fails(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: fails."""
        for i in range(128):
            out.write(f"{i:03d} " + "x" * 59 + "\n")  # 64 B a line: 8 KiB
        raise RuntimeError("disk on fire")

    result, events = await run(fails, {})
    assert result.is_error and result.outcome == "error"
    text = result.text
    assert text.startswith("000 " + "x" * 59 + "\n")
    assert "127 " + "x" * 59 + "\n" in text
    assert text.endswith("RuntimeError: disk on fire")
    assert len(text) == 8192 + len("RuntimeError: disk on fire")
    assert fold_updates(events, "c1") == result.state
    end = [e for e in events if isinstance(e, ToolEnd)]
    assert end == [ToolEnd("r1", "t1", "c1", is_error=True)]


async def test_tool_error_text_is_appended_as_is_and_terminate_is_honoured() -> None:
    @tool(params=Empty, name="stops")
    async def stops(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: stops."""
        out.write("partial")
        out.terminate(True)
        raise ToolError("the build is broken beyond repair")

    result, _ = await run(stops, {})
    assert result.text == "partial\nthe build is broken beyond repair"
    assert result.terminate is True and result.is_error
    assert result.to_message().to_json()["terminate"] is True


async def test_cancel_event_keeps_partial_output_with_a_marker() -> None:
    wrote = asyncio.Event()

    @tool(params=Empty, name="waits")
    async def waits(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: waits."""
        out.write("working...\n")
        wrote.set()
        await cancel.wait()
        out.write("stopping cleanly\n")

    cancel = asyncio.Event()
    bus = EventBus()
    events = recorder(bus)
    task = asyncio.create_task(
        execute_tool_call(waits, "c1", {}, run_id="r", turn_id="t", bus=bus, cancel=cancel)
    )
    await wrote.wait()
    cancel.set()
    result = await task
    assert result.outcome == "cancelled" and result.is_error
    assert result.text == "working...\nstopping cleanly\n" + CANCELLED_MARKER
    assert fold_updates(events, "c1") == result.state


async def test_a_tool_ignoring_cancel_is_cancelled_after_the_grace() -> None:
    wrote = asyncio.Event()

    @tool(params=Empty, name="stubborn")
    async def stubborn(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: stubborn."""
        out.write("partial")
        wrote.set()
        await asyncio.Event().wait()  # never returns on its own

    cancel = asyncio.Event()
    bus = EventBus()
    task = asyncio.create_task(
        execute_tool_call(
            stubborn, "c1", {}, run_id="r", turn_id="t", bus=bus, cancel=cancel, cancel_grace=0
        )
    )
    await wrote.wait()
    cancel.set()
    result = await task
    assert result.text == "partial\n" + CANCELLED_MARKER and result.outcome == "cancelled"


async def test_interruption_keeps_partial_output_emits_the_end_and_propagates() -> None:
    wrote = asyncio.Event()

    @tool(params=Empty, name="long")
    async def long(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: long."""
        out.write("half done\n")
        wrote.set()
        await asyncio.Event().wait()

    bus = EventBus()
    events = recorder(bus)
    task = asyncio.create_task(execute_tool_call(long, "c1", {}, run_id="r", turn_id="t", bus=bus))
    await wrote.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    check_call_shape(events, "c1")
    settled = events[-1]
    assert isinstance(settled, ToolSettled)
    assert settled.message["content"][0]["text"] == "half done\n" + INTERRUPTION_MARKER
    assert settled.message["outcome"] == "interrupted" and settled.message["is_error"]
    assert fold_updates(events, "c1")["content"][0]["text"] == "half done\n" + INTERRUPTION_MARKER


async def test_no_update_follows_tool_end_even_with_a_trailing_timer_armed() -> None:
    clock = FakeClock()
    written = asyncio.Event()
    proceed = asyncio.Event()

    @tool(params=Empty, name="bursty")
    async def bursty(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: bursty."""
        out.write("a")  # within min_interval of the base: the trailing timer is armed
        out.write("b")  # folds into the same pending state
        written.set()
        await proceed.wait()
        out.write("c")

    bus = EventBus()
    events = recorder(bus)
    task = asyncio.create_task(
        execute_tool_call(bursty, "c1", {}, run_id="r", turn_id="t", bus=bus, clock=clock)
    )
    await written.wait()
    assert len(clock.timers) == 1  # one trailing timer, no polling
    proceed.set()
    result = await task
    clock.advance(10.0)  # the timer would fire now; it was cancelled by the forced final flush
    ends = [i for i, e in enumerate(events) if isinstance(e, ToolEnd)]
    assert ends and not any(isinstance(e, ToolUpdate) for e in events[ends[0] :])
    assert fold_updates(events, "c1")["content"][0]["text"] == "abc" == result.text
    updates = [e for e in events if isinstance(e, ToolUpdate)]
    assert len(updates) == 2  # the base at once, then the forced final "abc"
    text_ops = [op for op in updates[1].ops if op[1] == ["content", 0, "text"]]
    assert text_ops == [["a", ["content", 0, "text"], "abc"]]


async def test_concurrent_tools_interleave_and_a_slow_one_blocks_nobody() -> None:
    slow_started = asyncio.Event()
    release = asyncio.Event()

    @tool(params=Empty, name="slow")
    async def slow(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: slow."""
        out.write("slow: begin\n")
        slow_started.set()
        await release.wait()
        out.write("slow: end\n")

    @tool(params=Empty, name="failing")
    async def failing(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: failing."""
        await slow_started.wait()
        out.write("failing: partial\n")
        raise ValueError("bad")

    harness = Harness([slow, failing, echo])
    events = recorder(harness.bus)

    def on_event(e: HarnessEvent) -> None:
        # Once the other two have ended, let the slow one finish.
        ended = {x.tool_call_id for x in events if isinstance(x, ToolEnd)}
        if {"b", "c"} <= ended:
            release.set()

    harness.bus.add_listener(on_event)
    results = await harness.run(
        [ToolCall("a", "slow"), ToolCall("b", "failing"), ToolCall("c", "echo", {"text": "e"})],
        run_id="run1",
    )
    assert [r.tool_call_id for r in results] == ["a", "b", "c"]
    assert [r.outcome for r in results] == ["ok", "error", "ok"]
    end_order = [e.tool_call_id for e in events if isinstance(e, ToolEnd)]
    assert end_order[-1] == "a"  # the slow call ended last, after the others streamed and ended
    assert events[0].type == "run_start" and events[-1].type == "run_end"
    for call_id, result in zip("abc", results, strict=True):
        check_call_shape(events[1:-1], call_id)
        assert fold_updates(events, call_id) == result.state


async def test_unknown_tool_settles_as_an_error_without_running() -> None:
    harness = Harness([echo])
    events = recorder(harness.bus)
    [result] = await harness.run([ToolCall("x", "nope", {})])
    assert result.outcome == "unknown_tool"
    assert result.text == "Unknown tool 'nope'; available tools: echo. The call was not run."
    check_call_shape(events[1:-1], "x")


async def test_memos_without_durability_raise_a_clear_error() -> None:
    @tool(params=Empty, name="memo_user")
    async def memo_user(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: memo user."""
        await context.set_memo("step1", True)

    result, _ = await run(memo_user, {})
    assert result.is_error
    assert "set_memo('step1'): memos need a durable session" in result.text


async def test_hooks_see_the_lifecycle_in_order_and_can_seed() -> None:
    calls: list[str] = []

    class Hooks(ExecutionHooks):
        async def seed_for(self, call: Any) -> Any:
            calls.append("seed")
            seeded = ToolOutput()
            seeded.write("recovered\n")
            return seeded.snapshot()

        async def on_sink_created(
            self, call: Any, sink: ToolOutput, context: ToolContext
        ) -> ToolContext:
            calls.append("sink")
            return context

        async def before_settle(self, call: Any, sink: ToolOutput, result: ToolResult) -> None:
            calls.append(f"settle:{result.text}")

    _, events = await run(echo, {"text": "more\n"}, hooks=Hooks())
    assert calls == ["seed", "sink", "settle:recovered\nmore\n"]
    first = next(e for e in events if isinstance(e, ToolUpdate))
    assert first.ops[0][1]["content"][0]["text"] == "recovered\n"


def test_tool_definitions_are_checked_and_export_a_schema() -> None:
    assert echo.name == "echo" and echo.description == "Echo text."
    schema = echo.json_schema()
    assert schema["required"] == ["text"] and schema["properties"]["times"]["minimum"] == 1
    assert echo.definition()["parameters"] == schema

    async def ok(*a: Any) -> None:
        return None

    def sync(*a: Any) -> None:
        return None

    with pytest.raises(ToolDefinitionError, match="tool name 'bad name' is invalid"):
        Tool(name="bad name", description="d", params=Empty, execute=ok)
    with pytest.raises(ToolDefinitionError, match="params must be a pydantic BaseModel subclass"):
        Tool(name="t", description="d", params=dict, execute=ok)  # type: ignore[type-var]
    with pytest.raises(ToolDefinitionError, match="execute must be an 'async def' function"):
        Tool(name="t", description="d", params=Empty, execute=sync)  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError, match="two tools are named 'echo'"):
        Harness([echo, echo])
    assert Tool(name="t", description="d", params=Empty, execute=ok).output == OutputPolicy()


async def test_memo_error_outside_a_tool_names_the_fix() -> None:
    ctx = ToolContext(tool_call_id="c9")
    with pytest.raises(MemoUnavailableError, match="attach durability to the Harness"):
        await ctx.get_memo("x")


async def test_details_only_mutations_are_published_while_the_tool_runs() -> None:
    mutated = asyncio.Event()
    release = asyncio.Event()

    @tool(params=Empty, name="progress")
    async def progress(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: progress."""
        out.details["phase"] = "indexing"
        mutated.set()
        await release.wait()

    bus = EventBus()
    got_phase = asyncio.Event()
    events: list[HarnessEvent] = []

    def listen(e: HarnessEvent) -> None:
        events.append(e)
        if isinstance(e, ToolUpdate) and ["s", ["details", "phase"], "indexing"] in e.ops:
            got_phase.set()

    bus.add_listener(listen)
    task = asyncio.create_task(
        execute_tool_call(
            progress, "c1", {}, run_id="r", turn_id="t", bus=bus, pacing=Pacing(min_interval=0)
        )
    )
    await mutated.wait()
    await got_phase.wait()  # published with no further sink call, before the tool ends
    assert not any(isinstance(e, ToolEnd) for e in events)
    release.set()
    result = await task
    assert result.details == {"phase": "indexing"}


async def test_subscribers_receive_each_calls_events_in_order() -> None:
    harness = Harness([echo])
    sub = harness.bus.subscribe()
    listened = recorder(harness.bus)
    await harness.run(
        [ToolCall(f"c{i}", "echo", {"text": f"{i}\n", "times": 5}) for i in range(4)], run_id="r"
    )
    harness.bus.close()
    received = [e async for e in sub]
    assert received == listened
    for i in range(4):
        check_call_shape(received[1:-1], f"c{i}")


async def test_a_run_cancel_event_cancels_every_call() -> None:
    started = asyncio.Event()
    count = 0

    @tool(params=Empty, name="waiter")
    async def waiter(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: waiter."""
        nonlocal count
        out.write(f"{tool_call_id} waiting\n")
        count += 1
        if count == 2:
            started.set()
        await cancel.wait()

    harness = Harness([waiter])
    cancel = asyncio.Event()
    task = asyncio.create_task(
        harness.run([ToolCall("a", "waiter"), ToolCall("b", "waiter")], cancel=cancel)
    )
    await started.wait()
    cancel.set()
    results = await task
    assert [r.outcome for r in results] == ["cancelled", "cancelled"]
    assert results[1].text == "b waiting\n" + CANCELLED_MARKER


async def test_oversized_details_at_the_very_end_fail_the_call_and_roll_back() -> None:
    @tool(params=Empty, name="bloats", output=OutputPolicy(max_details_bytes=100))
    async def bloats(
        tool_call_id: str,
        params: Empty,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        """A test tool: bloats."""
        out.write("work done\n")
        out.details["ok"] = True
        out.snapshot()  # a flush: details are checked (and fit) here
        out.details["blob"] = "x" * 500  # the last thing the tool does

    result, events = await run(bloats, {})
    assert result.is_error and result.outcome == "error"
    assert result.details == {"ok": True}  # rolled back to the last flush that fitted
    assert result.text.startswith("work done\nOutputLimitError: tool details serialise to")
    assert fold_updates(events, "c1") == result.state


async def test_a_failing_hook_propagates_after_the_call_is_ended() -> None:
    class BrokenStore(ExecutionHooks):
        async def before_settle(self, call: Any, sink: ToolOutput, result: ToolResult) -> None:
            raise OSError("disk full")

    bus = EventBus()
    events = recorder(bus)
    with pytest.raises(OSError, match="disk full"):
        await execute_tool_call(
            echo, "c1", {"text": "x"}, run_id="r", turn_id="t", bus=bus, hooks=BrokenStore()
        )
    assert isinstance(events[-1], ToolEnd) and events[-1].is_error
    assert not any(isinstance(e, ToolSettled) for e in events)  # nothing claims it settled
