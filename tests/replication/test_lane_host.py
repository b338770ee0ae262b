"""LaneHost: tracked reduction → ops → per-subscriber streams; bounds, close, routing, property."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lane_fixtures import TEXT, tail_stream, tool_state

from toolfold.chord import Decoder, apply, is_base
from toolfold.harness._lane import (
    LaneClosedError,
    LaneHost,
    Lanes,
    LaneSubscription,
    new_lane_view,
    reduce_lane_snapshot,
)
from toolfold.harness.events import (
    HarnessEvent,
    RunEnd,
    RunStart,
    ToolEnd,
    ToolSettled,
    ToolStart,
    ToolUpdate,
)


class Folder:
    """A replica fed straight from a subscription (no HTTP)."""

    def __init__(self, sub: LaneSubscription) -> None:
        self.sub = sub
        self.decoder = Decoder()
        self.value: Any = None
        self.ids: list[int] = []
        self.bases = 0

    def drain(self) -> None:
        while (batch := self.sub.next_nowait()) is not None:
            wire = json.loads(batch.data)
            assert batch.base == is_base(wire)
            if batch.base:
                self.bases += 1
            self.value = apply(self.value, self.decoder.decode(wire))
            self.ids.append(batch.id)


def test_subscribe_starts_with_a_base_of_the_current_view_then_consecutive_ids() -> None:
    host = LaneHost("main")
    events = list(tail_stream("t1", lines=300, window=40))
    for e in events[:20]:
        host.handle(e)
    f = Folder(host.subscribe())
    first = f.sub.next_nowait()
    assert first is not None and first.id == 0 and first.base
    f.value = apply(None, f.decoder.decode(json.loads(first.data)))
    f.ids.append(0)
    assert f.value == host.view
    for e in events[20:]:
        host.handle(e)
    f.drain()
    assert f.value == host.view
    assert f.ids == list(range(len(f.ids)))
    assert f.bases == 0  # only the first batch was a base


def test_a_small_append_to_a_long_output_publishes_a_small_batch() -> None:
    host = LaneHost("main")
    for e in list(tail_stream("t1", lines=4000, window=4000))[:-4]:
        host.handle(e)
    sub = host.subscribe()
    sub.next_nowait()  # the base
    host.handle(ToolUpdate("run1", "turn1", "t1", [["a", TEXT, "0123456789"]]))
    batch = sub.next_nowait()
    assert batch is not None and not batch.base
    # The output text is ~66 KB; the batch must carry the change, not the text.
    assert len(host.view["tools"]["t1"]["output"]["content"][0]["text"]) > 40_000
    assert len(batch.data) < 300, batch.data
    assert "0123456789" in batch.data


def test_a_tail_slide_publishes_truncate_and_append_not_a_whole_set() -> None:
    host = LaneHost("main")
    events = list(tail_stream("t1", lines=1000, window=100))
    for e in events[:60]:
        host.handle(e)
    sub = host.subscribe()
    sub.next_nowait()
    host.handle(events[60])
    batch = sub.next_nowait()
    assert batch is not None
    ops = Decoder().decode(json.loads(batch.data))
    verbs = [op[0] for op in ops]
    assert "t" in verbs and "a" in verbs, ops
    assert len(batch.data) < 2000


def test_subscribers_that_joined_together_share_bytes_and_a_late_one_gets_its_own_base() -> None:
    host = LaneHost("main")
    events = list(tail_stream("t1", lines=200, window=30))
    a, b = host.subscribe(), host.subscribe()
    for e in events[:30]:
        host.handle(e)
    c = host.subscribe()
    for e in events[30:]:
        host.handle(e)
    fa, fb, fc = Folder(a), Folder(b), Folder(c)
    datas: dict[str, list[str]] = {"a": [], "b": []}
    for name, sub in (("a", a), ("b", b)):
        while (batch := sub.next_nowait()) is not None:
            datas[name].append(batch.data)
    assert datas["a"] == datas["b"]
    fc.drain()
    assert fc.ids[0] == 0 and fc.bases == 1
    assert fc.value == host.view
    for data in datas["a"]:
        fa.value = apply(fa.value, fa.decoder.decode(json.loads(data)))
    assert fa.value == host.view
    del fb


def test_overflow_drops_the_backlog_and_sends_a_fresh_base() -> None:
    host = LaneHost("main", buffer_batches=4, buffer_bytes=1 << 20)
    sub = host.subscribe()
    f = Folder(sub)
    f.drain()
    for e in tail_stream("t1", lines=500, window=20, per_update=3):
        host.handle(e)
        assert sub.buffered_batches <= 4
    assert sub.resyncs >= 1
    f.drain()
    assert f.value == host.view
    assert f.ids == list(range(len(f.ids)))  # ids stay consecutive across the resync
    assert f.bases == 2 and len(f.ids) <= 2


def test_byte_bound_is_honoured_too() -> None:
    host = LaneHost("main", buffer_batches=10_000, buffer_bytes=4096)
    sub = host.subscribe()
    Folder(sub).drain()
    for e in tail_stream("t1", lines=2000, window=50):
        host.handle(e)
        assert sub.buffered_bytes <= 4096 + 2048
    assert sub.resyncs >= 1


def test_invalid_bounds_are_refused_with_a_clear_message() -> None:
    with pytest.raises(ValueError, match=r"buffer_batches=0.*use at least 1"):
        LaneHost("main", buffer_batches=0)


async def test_close_ends_subscriptions_and_refuses_more_work() -> None:
    host = LaneHost("main")
    sub = host.subscribe()
    received: list[int] = []
    started = asyncio.Event()

    async def consume() -> None:
        async for batch in sub:
            received.append(batch.id)
            started.set()

    task = asyncio.create_task(consume())
    await started.wait()
    host.close()
    await asyncio.wait_for(task, timeout=10)
    assert received == [0] and sub.closed
    with pytest.raises(LaneClosedError, match="lane 'main' is closed"):
        host.handle(RunStart("r"))
    with pytest.raises(LaneClosedError, match="subscribe to a live host"):
        host.subscribe()


async def test_unsubscribing_ends_only_that_stream() -> None:
    host = LaneHost("main")
    a, b = host.subscribe(), host.subscribe()
    a.close()
    assert host.subscribers == 1
    host.handle(RunStart("r1"))
    assert [x.id for x in iter(b.next_nowait, None)] == [0, 1]
    assert a.next_nowait() is None
    with pytest.raises(StopAsyncIteration):
        await a.__anext__()


def test_lanes_route_runs_to_their_lane_and_strays_to_the_default() -> None:
    lanes = Lanes()
    for e in tail_stream("t1", run_id="r1", lane="alpha", lines=10, window=5):
        lanes.handle(e)
    lanes.handle(ToolStart("unknown-run", "turn", "t9", "bash", {}))
    assert lanes.names() == ["alpha", "default"]
    assert lanes.host("alpha").view["tools"]["t1"]["status"] == "ok"
    assert "t9" in lanes.host("default").view["tools"]
    lanes.close()
    assert lanes.host("alpha").closed


# --- property: direct fold == tracked → encoded → decoded → applied replica ---------

TOOL_IDS = ["t1", "t2", "t3"]
RUN_IDS = ["r1", "r2"]
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text("ab😀字\n", max_size=4))
texts = st.text(alphabet="ab \n😀漢字ñ🇯🇵", max_size=12)


@st.composite
def update_ops(draw: st.DrawFn) -> list[list[Any]]:
    ops: list[list[Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["r", "a", "t", "s", "d", "p", "term", "bad", "bad2"]))
        if kind == "r":
            ops.append(["r", tool_state(draw(texts))])
        elif kind == "a":
            ops.append(["a", TEXT, draw(texts)])
        elif kind == "t":
            ops.append(["t", TEXT, draw(st.integers(0, 8))])
        elif kind == "s":
            ops.append(["s", ["details", draw(st.sampled_from("xyz"))], draw(json_leaf)])
        elif kind == "d":
            ops.append(["d", ["details", draw(st.sampled_from("xyz"))]])
        elif kind == "p":
            image = {
                "type": "image",
                "data": draw(st.sampled_from(["AAAA", "BBBB"])),
                "mime_type": "image/png",
            }
            ops.append(
                ["p", ["content"], draw(st.integers(1, 3)), draw(st.integers(0, 1)), [image]]
            )
        elif kind == "term":
            ops.append(["s", ["terminate"], draw(st.booleans())])
        elif kind == "bad":
            ops.append(["a", ["content", 7, "text"], "x"])
        else:
            ops.append(["t", ["details", "x"], 1])
    return ops


@st.composite
def events(draw: st.DrawFn) -> HarnessEvent:
    kind = draw(
        st.sampled_from(
            ["run_start", "run_end", "start", "update", "update", "update", "end", "settled"]
        )
    )
    run = draw(st.sampled_from(RUN_IDS))
    tid = draw(st.sampled_from(TOOL_IDS))
    if kind == "run_start":
        return RunStart(run, lane="p")
    if kind == "run_end":
        return RunEnd(run)
    if kind == "start":
        return ToolStart(run, "turn", tid, "bash", {"command": draw(texts)})
    if kind == "update":
        return ToolUpdate(run, "turn", tid, draw(update_ops()))
    if kind == "end":
        return ToolEnd(run, "turn", tid, is_error=draw(st.booleans()))
    message = {
        "tool_call_id": tid,
        "content": [{"type": "text", "text": draw(texts)}],
        "is_error": False,
    }
    return ToolSettled(run, "turn", tid, message)


@settings(max_examples=300, deadline=None)
@given(
    seq=st.lists(st.tuples(events(), st.sampled_from(["none", "drain", "join"])), max_size=40),
    bound=st.sampled_from([2, 5, 1000]),
)
def test_direct_fold_equals_replica_through_tracker_and_codec(
    seq: list[tuple[HarnessEvent, str]], bound: int
) -> None:
    direct = new_lane_view("p")
    host = LaneHost("p", transcript_tail=3, settled_tools=2, buffer_batches=bound)
    folders = [Folder(host.subscribe())]
    for event, action in seq:
        reduce_lane_snapshot(direct, event, transcript_tail=3, settled_tools=2)
        host.handle(event)
        if action == "drain":
            folders[0].drain()
        elif action == "join":
            folders.append(Folder(host.subscribe()))
    assert host.view == direct
    snapshot = copy.deepcopy(direct)
    for f in folders:
        f.drain()
        assert f.value == snapshot
        assert f.ids == list(range(len(f.ids)))


def test_an_event_the_tracker_refuses_is_reported_and_the_lane_keeps_going() -> None:
    lanes = Lanes()
    sub = lanes.host("main").subscribe()
    f = Folder(sub)
    lanes.handle(RunStart("r1", lane="main"))
    lanes.handle(ToolStart("r1", "turn", "bad", "bash", {"x": float("nan")}))
    assert len(lanes.errors) == 1
    message = str(lanes.errors[0])
    assert "lane 'main' could not reduce a tool_start event" in message
    assert "keeps what was applied before" in message
    view = lanes.host("main").view
    assert "bad" not in view["tools"] and view["order"] == []
    for e in tail_stream("t1", run_id="r1", lines=20, window=5, with_run=False):
        lanes.handle(e)
    f.drain()
    assert f.value == lanes.host("main").view
    assert lanes.host("main").view["tools"]["t1"]["status"] == "ok"


def test_a_truncate_that_splits_an_emoji_shows_a_replacement_character_to_everyone() -> None:
    """A lone surrogate is no value (docs/protocol.md, "Values"): the lane holds U+FFFD in its
    place, and early and late subscribers fold the same text."""
    host = LaneHost("main")
    f = Folder(host.subscribe())
    host.handle(ToolStart("r1", "turn", "t1", "bash", {}))
    host.handle(ToolUpdate("r1", "turn", "t1", [["r", tool_state("😀漢字")]]))
    host.handle(ToolUpdate("r1", "turn", "t1", [["t", TEXT, 1]]))  # half of the emoji
    late = Folder(host.subscribe())
    f.drain()
    late.drain()
    assert host.view["tools"]["t1"]["output"]["content"][0]["text"] == "\ufffd漢字"
    assert f.value == host.view
    assert late.value == host.view
