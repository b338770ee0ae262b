"""Per-call durability: ``execute_tool_call(..., durability=...)`` for a loop that runs
tools one call at a time (the framework adapters' seam)."""

from __future__ import annotations

import asyncio

import pytest
from durability_helpers import Store, Tap, wait_reached
from pydantic import BaseModel
from test_durability_harness import Gates, crash_during

from toolfold.durability import Durability, pending_tool_output, recover
from toolfold.harness import (
    INTERRUPTION_MARKER,
    MISSING,
    EventBus,
    ExecutionHooks,
    Harness,
    ToolContext,
    ToolDefinitionError,
    execute_tool_call,
    tool,
)
from toolfold.output import ToolOutput


class NoParams(BaseModel):
    pass


def gated_tool(gates: Gates) -> object:
    @tool(params=NoParams)
    async def slow(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Writes, memoises, reports, then waits for the gate."""
        out.write("part one\n")
        await ctx.set_memo("one", True)
        assert await ctx.get_memo("one") is True
        assert await ctx.get_memo("two") is MISSING
        gates.reached.set()
        await gates.forever.wait()
        out.write("part two\n")

    return slow


async def test_a_single_call_with_durability_checkpoints_and_settles(store: Store) -> None:
    session = await store.session()
    gates = Gates()
    slow = gated_tool(gates)
    durability = Durability(session, interval=0.0)
    task = asyncio.ensure_future(
        execute_tool_call(
            slow, "c1", {}, run_id="r1", turn_id="t1", bus=EventBus(), durability=durability
        )
    )
    await wait_reached(gates.reached, task)
    # While it runs: one operation of one call, its output checkpointed.
    [pending] = await durability.pending_operations()
    assert pending.run_id == "r1"
    assert [(c.tool_call_id, c.tool_name, c.turn_id) for c in pending.calls] == [
        ("c1", "slow", "t1")
    ]
    recovered = await recover(session, pending_tool_output(pending.operation_id, "c1"))
    assert recovered is not None
    assert recovered.value["content"][0]["text"] == "part one\n"
    gates.forever.set()
    result = await task
    assert not result.is_error and result.text == "part one\npart two\n"
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["tool_call_id"] == "c1" and entry["operation_id"] == pending.operation_id
    assert entry["run_id"] == "r1" and entry["turn_id"] == "t1"
    assert entry["content"][0]["text"] == "part one\npart two\n"
    assert await session.live_scopes() == []


async def test_concurrent_single_calls_of_one_run_settle_independently(store: Store) -> None:
    session = await store.session()
    first, second = Gates(), Gates()
    durability = Durability(session, interval=0.0)
    bus = EventBus()
    a = asyncio.ensure_future(
        execute_tool_call(
            gated_tool(first), "a", {}, run_id="r", turn_id="t", bus=bus, durability=durability
        )
    )
    b = asyncio.ensure_future(
        execute_tool_call(
            gated_tool(second), "b", {}, run_id="r", turn_id="t", bus=bus, durability=durability
        )
    )
    await wait_reached(first.reached, a)
    await wait_reached(second.reached, b)
    assert len(await durability.pending_operations()) == 2
    first.forever.set()
    await a
    # The first call's settlement retired only its own scope.
    [left] = await durability.pending_operations()
    assert [c.tool_call_id for c in left.calls] == ["b"]
    second.forever.set()
    await b
    assert await session.live_scopes() == []
    assert sorted(e.value["tool_call_id"] for e in await session.read_entries()) == ["a", "b"]


async def test_a_crashed_single_call_is_settled_by_resume_with_its_partial_output(
    store: Store,
) -> None:
    tap = Tap(await store.session())
    gates = Gates()
    slow = gated_tool(gates)
    run = execute_tool_call(
        slow,
        "c1",
        {},
        run_id="r1",
        turn_id="t1",
        bus=EventBus(),
        durability=Durability(tap, interval=0.0),  # type: ignore[arg-type]
    )
    await crash_during(tap, run, gates.reached)
    session = await store.restart(tap)
    [result] = await Harness([slow], session=session).resume()
    assert result.outcome == "interrupted"
    assert result.text == "part one\n" + INTERRUPTION_MARKER
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["tool_call_id"] == "c1" and entry["run_id"] == "r1"
    assert await session.live_scopes() == []


async def test_durability_and_hooks_together_are_refused(store: Store) -> None:
    session = await store.session()
    with pytest.raises(ToolDefinitionError, match="pass either durability= or hooks="):
        await execute_tool_call(
            gated_tool(Gates()),  # type: ignore[arg-type]
            "c1",
            {},
            run_id="r",
            turn_id="t",
            bus=EventBus(),
            hooks=ExecutionHooks(),
            durability=Durability(session),
        )
    assert await session.live_scopes() == []
