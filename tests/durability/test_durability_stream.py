"""DurableStream and recover(): paced checkpoints, forced writes, periodic bases, recovery
equals the producer's state at its last durable batch, fencing, failed commits."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from durability_helpers import Store, Tap, trailing_done
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.durability import (
    DurableStream,
    RecoveryError,
    pending_assistant_output,
    pending_tool_output,
    recover,
)
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import MemoryRepository, StorageError, append_list, list_address
from toolfold.storage._records import encode_json


class FakeClock:
    """An injectable monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def sink(max_bytes: int = 2048) -> ToolOutput:
    return ToolOutput(OutputPolicy(retain="tail", max_bytes=max_bytes, max_lines=10_000))


def durable(session: Any, out: ToolOutput, **kw: Any) -> DurableStream:
    kw.setdefault("interval", 0.0)
    return DurableStream(session, pending_tool_output("op1", "call1"), out.open_stream(), **kw)


async def test_addresses_match_the_spec() -> None:
    a = pending_tool_output("op_7", "call_1")
    assert (a.namespace, a.key, a.scope.id) == ("pending.tool_output", "op_7:call_1", "op_7")
    b = pending_assistant_output("op_7", "entry_3")
    assert (b.namespace, b.key, b.scope.id) == ("pending.assistant_output", "op_7:entry_3", "op_7")


async def test_recovered_state_is_the_state_at_the_last_durable_write(store: Store) -> None:
    session = await store.session()
    out = sink()
    ds = durable(session, out)
    rng = random.Random(7)
    durable_states: list[Any] = []
    for i in range(120):
        out.write(f"line {i} {'x' * rng.randrange(0, 60)}\n")
        out.details["n"] = i
        if i % 7 == 0:
            out.details.setdefault("seen", []).append(i)
        if rng.random() < 0.4 and await ds.checkpoint():
            durable_states.append(out.snapshot())
    out.write("unsaved tail\n")  # never made durable
    session = await store.restart(session)
    got = await recover(session, pending_tool_output("op1", "call1"))
    assert got is not None
    assert got.value == durable_states[-1]
    assert "unsaved tail" not in got.value["content"][0]["text"]


async def test_first_durable_batch_is_a_base_and_tagged(store: Store) -> None:
    session = await store.session()
    out = sink()
    ds = durable(session, out)
    out.write("hello" * 200)
    assert await ds.checkpoint()
    out.write(" world")  # small against the base: a delta
    assert await ds.checkpoint()
    els = await session.read_list(pending_tool_output("op1", "call1"))
    assert [e.tag for e in els] == ["base", None]
    assert els[0].value[0][0] == "r"


async def test_checkpoint_only_when_dirty_and_paced() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    clock = FakeClock()
    out = sink()
    ds = durable(session, out, interval=1.0, clock=clock)
    out.write("a")
    # Pacing starts when the stream opens: a call that ends within its first interval
    # is written once, by its terminal (forced) write.
    assert not await ds.checkpoint()
    clock.now += 1.0
    assert await ds.checkpoint()
    out.write("b")
    clock.now += 0.5
    assert not await ds.checkpoint()  # paced: too soon
    clock.now += 0.5
    assert await ds.checkpoint()
    clock.now += 5
    assert not await ds.checkpoint()  # not dirty: nothing to write
    out.write("c")
    assert await ds.force()  # forced writes bypass pacing
    assert ds.stats.batches == 3
    assert ds.stats.skipped_paced == 3


async def test_a_call_that_ends_within_its_first_interval_is_written_once() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    clock = FakeClock()
    out = sink()
    ds = durable(session, out, interval=1.0, clock=clock)
    out.write("done\n")
    ds.notify()  # the trailing timer waits for the interval...
    clock.now += 0.2
    assert await ds.force()  # ...the call ends first: its terminal write is the only one
    await ds.aclose()
    els = await session.read_list(ds.address)
    assert [e.tag for e in els] == ["base"]
    assert ds.stats.batches == 1


async def test_periodic_rebase_bounds_replay(store: Store) -> None:
    session = await store.session()
    out = sink(max_bytes=50 * 1024)
    ds = durable(session, out, rebase_every=10)
    # A large base first: the deltas then stay far below it, so the count is what
    # triggers each base (not the bytes; see the next tests).
    out.write("x" * 40_000 + "\n")
    replayed = []
    for i in range(57):
        out.write(f"{i:04d} " + "y" * 90 + "\n")
        assert await ds.checkpoint()
        got = await recover(session, ds.address, page=4)  # small pages: paging is exercised
        assert got is not None
        assert got.value == out.snapshot()
        replayed.append(got.batches)
    assert max(replayed) == 10  # a base plus at most 9 deltas
    assert ds.stats.bases == 6  # batches 1, 11, 21, ... 51


async def test_without_rebase_replay_grows_with_the_stream() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    out = sink(max_bytes=50 * 1024)
    ds = durable(session, out, rebase_every=10_000)
    out.write("x" * 40_000 + "\n")
    for i in range(40):
        out.write(f"{i} " + "z" * 50 + "\n")
        await ds.checkpoint()
    got = await recover(session, ds.address, page=7)
    assert got is not None and got.batches == 40 and got.value == out.snapshot()


async def test_a_base_drops_the_batches_before_it(store: Store) -> None:
    session = await store.session()
    out = sink(max_bytes=50 * 1024)
    ds = durable(session, out, rebase_every=5)
    out.write("x" * 10_000 + "\n")
    for i in range(13):
        out.write(f"{i}\n")
        await ds.checkpoint()
    # Bases at batches 1, 6, 11: the list holds the newest base and the deltas since.
    assert ds.stats.bases == 3
    tags = [e.tag for e in await session.read_list(ds.address)]
    assert tags == ["base", None, None]
    got = await recover(session, ds.address)
    assert got is not None and got.value == out.snapshot()


async def test_bytes_decide_bases_too(store: Store) -> None:
    """A delta of a third of the base or more is stored as a base instead, and once the
    deltas since a base outweigh it the next batch is a base: recovery reads at most
    about two bases' worth, however the output arrives."""
    session = await store.session()
    out = sink(max_bytes=30_000)
    ds = durable(session, out, rebase_every=10_000)
    out.write("a" * 9_000 + "\n")
    await ds.checkpoint()
    out.write("b" * 4_000 + "\n")  # 4 KB against a 9 KB base: stored as a base
    await ds.checkpoint()
    assert ds.stats.bases == 2
    for i in range(40):  # small deltas until they outweigh the base
        out.write(f"{i:03d}" + "c" * 500 + "\n")
        await ds.checkpoint()
        got = await recover(session, ds.address)
        assert got is not None and got.value == out.snapshot()
        base, *deltas = [len(encode_json(e.value)) for e in await session.read_list(ds.address)]
        assert sum(deltas) < base + 600  # the deltas since the base never outweigh it by
        # more than the one that tipped them over
    assert ds.stats.bases > 2


async def test_recover_of_nothing_is_none(store: Store) -> None:
    session = await store.session()
    assert await recover(session, pending_tool_output("nope", "x")) is None


async def test_recover_without_a_base_names_the_list_and_keeps_it() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    addr = list_address("pending.tool_output", "op9:c", pending_tool_output("op9", "c").scope)
    await session.commit([append_list(addr, [["a", ["content", 0, "text"], "x"]])])
    with pytest.raises(RecoveryError, match=r"'pending.tool_output'/'op9:c'.*no base batch"):
        await recover(session, addr)
    assert len(await session.read_list(addr)) == 1  # nothing dropped


async def test_recover_reports_a_corrupt_delta_with_its_seq() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    addr = pending_tool_output("op9", "c")
    await session.commit([append_list(addr, [["r", {"x": ""}]], tag="base")])
    res = await session.commit([append_list(addr, [["a", 5, "text"]])])  # unknown id 5
    with pytest.raises(RecoveryError, match=rf"seq {res.seqs[0]} of list"):
        await recover(session, addr)


async def test_failed_commit_makes_the_next_batch_a_base(store: Store) -> None:
    inner = await store.session()
    tap = Tap(inner)
    out = sink()
    ds = durable(tap, out)
    out.write("one\n")
    assert await ds.checkpoint()
    out.write("two\n")
    tap.fail_at = 2
    assert not await ds.checkpoint()  # ordinary checkpoints are best effort
    assert ds.stats.failed == 1
    out.write("three\n")
    assert await ds.checkpoint()
    els = await inner.read_list(ds.address)
    # The ops lost with #2 are in a new base, which replaced the first one.
    assert [e.tag for e in els] == ["base"] and ds.stats.bases == 2
    assert "three" in str(els[0].value)
    got = await recover(inner, ds.address)
    assert got is not None and got.value == out.snapshot()


async def test_forced_write_failure_propagates() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    tap = Tap(session)
    out = sink()
    ds = durable(tap, out)
    out.write("x")
    tap.fail_at = 1
    with pytest.raises(StorageError, match="injected failure of commit #1"):
        await ds.force()


async def test_fenced_stream_writes_nothing_even_if_already_queued(store: Store) -> None:
    inner = await store.session()
    tap = Tap(inner)
    out = sink()
    ds = durable(tap, out)
    out.write("before\n")
    tap.hold_at = 1
    queued = asyncio.ensure_future(ds.force())
    await tap.held.wait()
    ds.fence()  # settlement fences before it retires the scope
    tap.release.set()
    assert await queued is False
    assert await inner.read_list(ds.address) == []
    out.write("late\n")
    assert not await ds.checkpoint()
    assert not await ds.force()


async def test_notify_schedules_one_trailing_checkpoint() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    out = sink()
    ds = durable(session, out, interval=0.0)
    done = asyncio.Event()
    original = ds.checkpoint

    async def spy() -> bool:
        ok = await original()
        done.set()
        return ok

    ds.checkpoint = spy  # type: ignore[method-assign]
    out.write("a")
    ds.notify()
    ds.notify()  # coalesced with the pending timer
    await done.wait()
    assert ds.stats.batches == 1
    got = await recover(session, ds.address)
    assert got is not None and got.value == out.snapshot()
    await ds.aclose()


async def test_bad_arguments_are_refused() -> None:
    session = await MemoryRepository().open_session("s", create=True)
    with pytest.raises(ValueError, match="rebase_every must be >= 1, got 0"):
        durable(session, sink(), rebase_every=0)
    with pytest.raises(ValueError, match="interval must be >= 0 seconds, got -1"):
        durable(session, sink(), interval=-1)


ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.text(max_size=40)),
        st.tuples(st.just("detail"), st.integers(0, 5)),
        st.tuples(st.just("drop"), st.integers(0, 5)),
        st.tuples(st.just("usage"), st.integers(1, 100)),
        st.tuples(st.just("checkpoint"), st.none()),
        st.tuples(st.just("force"), st.none()),
        st.tuples(st.just("base"), st.none()),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(actions=ACTIONS, rebase_every=st.integers(1, 6), page=st.integers(1, 5))
def test_recovery_equals_some_durable_batch_property(
    actions: list[tuple[str, Any]], rebase_every: int, page: int
) -> None:
    async def scenario() -> None:
        session = await MemoryRepository().open_session("s", create=True)
        out = sink(max_bytes=300)
        ds = durable(session, out, rebase_every=rebase_every)
        last: Any = None
        for verb, arg in actions:
            if verb == "write":
                out.write(arg)
            elif verb == "detail":
                out.details[f"k{arg}"] = out.details.get(f"k{arg}", 0) + 1
            elif verb == "drop":
                out.details.pop(f"k{arg}", None)
            elif verb == "usage":
                out.usage({"input_tokens": arg})
            elif verb in ("checkpoint", "force", "base"):
                wrote = (
                    await ds.checkpoint()
                    if verb == "checkpoint"
                    else await ds.force(base=verb == "base")
                )
                if wrote:
                    last = out.snapshot()
        got = await recover(session, ds.address, page=page)
        if last is None:
            assert got is None
        else:
            assert got is not None
            assert got.value == last
            assert got.batches <= rebase_every

    asyncio.run(scenario())


async def test_changes_during_an_inflight_checkpoint_are_written_by_the_same_timer(
    store: Store,
) -> None:
    inner = await store.session()
    tap = Tap(inner)
    tap.hold_at = 1
    tap.hold_inside = True
    out = sink()
    ds = durable(tap, out, interval=0.0)
    out.write("first\n")
    ds.notify()
    await tap.held.wait()  # the timer's checkpoint holds the session line
    out.write("second\n")
    ds.notify()  # the timer is still running: this notify does nothing by itself
    tap.release.set()
    assert await trailing_done(ds) is not None
    got = await recover(inner, ds.address)
    assert got is not None
    assert got.value["content"][0]["text"] == "first\nsecond\n"
    assert ds.stats.batches == 2


async def test_the_stream_is_generic_an_assistant_message_recovers_too(store: Store) -> None:
    from toolfold.chord import track
    from toolfold.harness import TrackerSource

    session = await store.session()
    msg = track({"role": "assistant", "content": [{"type": "text", "text": ""}]})
    ds = DurableStream(
        session,
        pending_assistant_output("op1", "entry1"),
        TrackerSource(msg),
        interval=0.0,
        rebase_every=4,
    )
    for i in range(10):
        msg.state["content"][0]["text"] += f"token{i} "
        assert await ds.checkpoint()
    session = await store.restart(session)
    got = await recover(session, pending_assistant_output("op1", "entry1"))
    assert got is not None and got.value == msg.target
    assert got.batches <= 4
