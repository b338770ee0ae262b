"""The edges of memos (found by mutation testing, docs/TESTING.md): ``MISSING`` deletes a
memo like ``None``, reads as false and names itself; every refusal says what happened;
a settlement that lands between ``set_memo`` and its commit writes nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from durability_helpers import Tap

from toolfold.durability import (
    MISSING,
    DurableStream,
    MemoError,
    commit_memo,
    operation_memo_seed,
    operation_tool_memo,
    pending_tool_output,
)
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import Session

OP, INV = "op1", "call1"


def stream_over(session: Any) -> tuple[ToolOutput, DurableStream]:
    out = ToolOutput(OutputPolicy(retain="tail", max_bytes=10_000))
    return out, DurableStream(session, pending_tool_output(OP, INV), out.open_stream(), interval=0)


def test_missing_is_false_and_names_itself() -> None:
    assert not MISSING
    assert repr(MISSING) == "MISSING"


async def test_missing_deletes_a_memo_and_still_checkpoints(session: Session) -> None:
    out, ds = stream_over(session)
    out.write("did X\n")
    await commit_memo(ds, OP, INV, "x", {"done": True})
    out.write("undid X\n")
    await commit_memo(ds, OP, INV, "x", MISSING)
    assert await session.get_value(operation_tool_memo(OP, INV, "x")) is None
    seed = await session.get_value(operation_memo_seed(OP, INV))
    assert seed is not None and "undid X" in str(seed)


async def test_a_memo_after_the_settlement_says_when_memos_can_be_written(
    session: Session,
) -> None:
    _, ds = stream_over(session)
    ds.fence()
    with pytest.raises(MemoError) as info:
        await commit_memo(ds, OP, INV, "late", 1)
    assert str(info.value) == (
        "set_memo('late') after invocation 'call1' was settled; memos can only be written "
        "while the tool runs"
    )


async def test_a_settlement_landing_before_the_memo_commit_writes_nothing(
    session: Session,
) -> None:
    tap = Tap(session)
    out, ds = stream_over(tap)
    out.write("did X\n")
    tap.hold_at = 1  # the memo's commit waits before it reaches the session line
    task = asyncio.ensure_future(commit_memo(ds, OP, INV, "x", 1))
    try:
        await asyncio.wait_for(tap.held.wait(), 10)
        ds.fence()  # the call settles meanwhile
        tap.release.set()
        with pytest.raises(MemoError) as info:
            await asyncio.wait_for(task, 10)
    finally:
        task.cancel()
    assert str(info.value) == (
        "set_memo('x') raced with the settlement of invocation 'call1'; the memo was not written"
    )
    assert await session.get_value(operation_tool_memo(OP, INV, "x")) is None
    assert await session.get_value(operation_memo_seed(OP, INV)) is None


class EmptySource:
    """An op source with nothing to checkpoint, not even a base."""

    dirty = False

    def take(self) -> list[Any]:
        return []

    def rebase(self) -> None:
        pass


async def test_a_memo_with_no_output_state_to_seed_is_refused(session: Session) -> None:
    ds = DurableStream(session, pending_tool_output(OP, INV), EmptySource(), interval=0)
    with pytest.raises(MemoError) as info:
        await commit_memo(ds, OP, INV, "x", 1)
    assert str(info.value) == "the output of invocation 'call1' has no state to seed"
    assert await session.get_value(operation_tool_memo(OP, INV, "x")) is None
