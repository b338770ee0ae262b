"""The memo invariant and the write-ordering race (docs/durability.md).

Two ordered commits are shown to be broken designs — memo-then-checkpoint loses output,
checkpoint-then-memo duplicates it — by crashing between the two commits; the bundled
transaction is shown to be right at every crash point. Then the write-ordering race: a checkpoint
requested before a memo checkpoint but delayed cannot land older state after it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from durability_helpers import SimulatedCrash, Store, Tap

from toolfold.durability import (
    DurableStream,
    MemoError,
    commit_memo,
    load_memo_seed,
    operation_memo_seed,
    operation_tool_memo,
    pending_tool_output,
    recover,
)
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import set_value

OP, INV = "op1", "call1"
STEPS = 4
EXPECTED = "".join(f"step {i} done\n" for i in range(STEPS))

MemoWriter = Callable[[Any, DurableStream, int], Awaitable[None]]


def new_sink(seed: Any = None) -> ToolOutput:
    return ToolOutput(OutputPolicy(retain="tail", max_bytes=10_000), seed=seed)


def stream_for(session: Any, out: ToolOutput) -> DurableStream:
    return DurableStream(session, pending_tool_output(OP, INV), out.open_stream(), interval=0.0)


# -- the three designs: how "I did step i" is recorded -------------------------------


async def memo_then_checkpoint(session: Any, ds: DurableStream, i: int) -> None:
    """BROKEN: two commits, memo first."""
    await session.commit([set_value(operation_tool_memo(OP, INV, f"step{i}"), True)])
    await ds.force(base=True)


async def checkpoint_then_memo(session: Any, ds: DurableStream, i: int) -> None:
    """BROKEN: two commits, checkpoint first."""
    await ds.force(base=True)
    await session.commit([set_value(operation_tool_memo(OP, INV, f"step{i}"), True)])


async def bundled(session: Any, ds: DurableStream, i: int) -> None:
    """The design: one transaction (toolfold's set_memo)."""
    await commit_memo(ds, OP, INV, f"step{i}", True)


async def run_tool(session: Any, seed: Any, record: MemoWriter) -> str:
    """A replay-safe multi-step tool: skips memoised steps, writes each step's output,
    then memoises the step."""
    out = new_sink(seed)
    ds = stream_for(session, out)
    for i in range(STEPS):
        if await session.get_value(operation_tool_memo(OP, INV, f"step{i}")) is not None:
            continue  # memoised work is skipped and emits nothing
        out.write(f"step {i} done\n")
        await record(session, ds, i)
    return out.text


async def crash_and_replay(store: Store, record: MemoWriter, crash_at: int) -> str:
    """Run until commit #crash_at 'crashes', restart, replay seeded, return the output."""
    session = await store.session(f"s-{record.__name__}-{crash_at}")
    tap = Tap(session)
    tap.crash_at = crash_at
    with contextlib.suppress(SimulatedCrash):  # no crash if crash_at is past the end
        await run_tool(tap, None, record)
    session = await store.restart(tap)
    if record is bundled:
        seed = await load_memo_seed(session, OP, INV)
    else:
        # The ordered designs have no memo seed: they seed from the latest checkpoint.
        got = await recover(session, pending_tool_output(OP, INV))
        seed = None if got is None else got.value
    return await run_tool(session, seed, record)


async def test_memo_then_checkpoint_loses_output(store: Store) -> None:
    # Commit #1 is step 0's memo, #2 its checkpoint: crash between them (before #2).
    text = await crash_and_replay(store, memo_then_checkpoint, crash_at=2)
    assert "step 0 done" not in text  # replay skipped step 0, the seed never had it
    assert text == EXPECTED.replace("step 0 done\n", "")


async def test_checkpoint_then_memo_duplicates_output(store: Store) -> None:
    text = await crash_and_replay(store, checkpoint_then_memo, crash_at=2)
    assert text.count("step 0 done") == 2  # the seed had it, replay redid it
    assert text == "step 0 done\n" + EXPECTED


async def test_bundled_memo_is_exact_at_every_crash_point(store: Store) -> None:
    # STEPS commits in a full run; crash before each of them and after the last.
    for crash_at in range(1, STEPS + 2):
        text = await crash_and_replay(store, bundled, crash_at)
        assert text == EXPECTED, f"crash before commit #{crash_at}"


async def test_ordered_designs_fail_somewhere_bundled_never(store: Store) -> None:
    outcomes: dict[str, set[str]] = {}
    for name, record in [
        ("memo_then_checkpoint", memo_then_checkpoint),
        ("checkpoint_then_memo", checkpoint_then_memo),
    ]:
        seen = set()
        for crash_at in range(1, 2 * STEPS + 2):
            text = await crash_and_replay(store, record, crash_at)
            seen.add(
                "ok" if text == EXPECTED else "lost" if len(text) < len(EXPECTED) else "duplicated"
            )
        outcomes[name] = seen
    assert outcomes == {
        "memo_then_checkpoint": {"ok", "lost"},
        "checkpoint_then_memo": {"ok", "duplicated"},
    }


async def test_memo_commit_is_one_transaction_in_the_operation_scope(store: Store) -> None:
    session = await store.session()
    seen: list[Any] = []

    class Spy(Tap):
        async def commit(self, writes: Any, **kw: Any) -> Any:
            def planned() -> Any:
                ws = writes() if callable(writes) else writes
                seen.append(list(ws))
                return ws

            return await self.inner.commit(planned, **kw)

    spy = Spy(session)
    out = new_sink()
    ds = stream_for(spy, out)
    out.write("did X\n")
    await commit_memo(ds, OP, INV, "x", {"path": "/tmp/x"})
    assert len(seen) == 1
    kinds = [type(w).__name__ for w in seen[0]]
    # The checkpoint is a base, so the batches before it are dropped in the same commit.
    assert kinds == ["SetValue", "DeleteList", "AppendList", "SetValue"]
    assert {w.address.scope.id for w in seen[0]} == {OP}
    assert seen[0][2].tag == "base"
    assert await session.get_value(operation_tool_memo(OP, INV, "x")) == {"path": "/tmp/x"}
    assert (await load_memo_seed(session, OP, INV))["content"][0]["text"] == "did X\n"
    # None deletes the memo (and still checkpoints).
    await commit_memo(ds, OP, INV, "x", None)
    assert await session.get_value(operation_tool_memo(OP, INV, "x")) is None
    assert await session.get_value(operation_memo_seed(OP, INV)) is not None


async def test_bad_memo_name_is_refused_and_nothing_is_written(store: Store) -> None:
    session = await store.session()
    out = new_sink()
    ds = stream_for(session, out)
    out.write("keep me\n")
    await commit_memo(ds, OP, INV, "ok", 1)
    for bad in ["", "a b", "x" * 129, "é"]:
        with pytest.raises(MemoError, match=r"invalid memo name .*A-Z a-z 0-9 _ \. - /"):
            await commit_memo(ds, OP, INV, bad, 2)
    got = await recover(session, ds.address)
    assert got is not None and got.value["content"][0]["text"] == "keep me\n"
    assert await session.get_value(operation_tool_memo(OP, INV, "ok")) == 1


async def test_memo_after_fence_is_refused(store: Store) -> None:
    session = await store.session()
    out = new_sink()
    ds = stream_for(session, out)
    ds.fence()
    with pytest.raises(MemoError, match=r"set_memo\('late'\) after invocation 'call1' was settled"):
        await commit_memo(ds, OP, INV, "late", 1)
    assert await session.get_value(operation_tool_memo(OP, INV, "late")) is None


# -- write ordering: a slow checkpoint requested before a memo checkpoint ------------------------


async def test_delayed_checkpoint_cannot_overwrite_a_later_memo_checkpoint(store: Store) -> None:
    inner = await store.session()
    tap = Tap(inner)
    out = new_sink()
    ds = stream_for(tap, out)
    out.write("T1 state\n")
    tap.hold_at = 1  # the ordinary checkpoint requested now is slow to reach the line
    slow = asyncio.ensure_future(ds.force())
    await tap.held.wait()
    out.write("X output\n")
    await commit_memo(ds, OP, INV, "did_x", True)  # commit #2 lands first
    tap.release.set()
    await slow  # its payload is computed now, inside the line: nothing older than #2
    got = await recover(inner, ds.address)
    assert got is not None
    assert got.value["content"][0]["text"] == "T1 state\nX output\n"
    assert got.value == out.snapshot()


async def test_checkpoint_slow_inside_the_line_is_followed_not_overtaken(store: Store) -> None:
    inner = await store.session()
    tap = Tap(inner)
    out = new_sink()
    ds = stream_for(tap, out)
    out.write("T1 state\n")
    tap.hold_at = 1
    tap.hold_inside = True  # payload computed, the backend write is slow
    slow = asyncio.ensure_future(ds.force())
    await tap.held.wait()
    out.write("X output\n")
    memo = asyncio.ensure_future(commit_memo(ds, OP, INV, "did_x", True))
    await asyncio.sleep(0)  # let the memo queue on the line (no ordering relies on it)
    tap.release.set()
    await slow
    await memo
    got = await recover(inner, ds.address)
    assert got is not None and got.value == out.snapshot()
    assert (await load_memo_seed(inner, OP, INV)) == out.snapshot()


async def test_captured_at_request_time_is_the_broken_design(store: Store) -> None:
    """What write ordering forbids: capture the payload when requested, commit it later."""
    inner = await store.session()
    out = new_sink()
    ds = stream_for(inner, out)
    out.write("T1 state\n")
    stale = ds.plan()  # captured at T1 ...
    out.write("X output\n")
    await commit_memo(ds, OP, INV, "did_x", True)
    await inner.commit(stale)  # ... and landing after the memo checkpoint
    got = await recover(inner, ds.address)
    assert got is not None
    assert got.value["content"][0]["text"] == "T1 state\n"  # older state won: X lost
