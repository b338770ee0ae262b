"""Attaching mid-run: a lane (listener), a bus subscriber and a lane subscription that
join halfway through a long call converge on the same view as those there from the start."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lane_fixtures import line_text
from pydantic import BaseModel

from toolfold.chord import Decoder, apply
from toolfold.harness import (
    EventBus,
    Harness,
    Pacing,
    RunEnd,
    RunStart,
    ToolCall,
    ToolEnd,
    ToolStart,
    tool,
)
from toolfold.harness._lane import Lanes, new_lane_view, reduce_lane_snapshot
from toolfold.output import OutputPolicy

LANE = "work"
LINES = 400
HALF = 200


class _Params(BaseModel):
    pass


def _long_tool(half: asyncio.Event, resume: asyncio.Event) -> Any:
    @tool(params=_Params, name="long", output=OutputPolicy(max_lines=60, max_bytes=4000))
    async def long(tool_call_id: str, params: _Params, cancel: Any, out: Any, context: Any) -> None:
        """Writes LINES lines into a sliding tail window, pausing halfway."""
        for i in range(LINES):
            out.write(line_text(i))
            if i % 10 == 0:
                out.details["written"] = i
            if i == HALF:
                half.set()
                await resume.wait()
            await asyncio.sleep(0)

    return long


async def _until(condition: Any, what: str, tries: int = 500) -> None:
    for _ in range(tries):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")


def _text(view: Any, call: str) -> str | None:
    tool_entry = view["tools"].get(call)
    if tool_entry is None or tool_entry["output"] is None:
        return None
    text: str = tool_entry["output"]["content"][0]["text"]
    return text


async def test_a_lane_attached_halfway_converges_with_one_there_from_the_start() -> None:
    half, resume = asyncio.Event(), asyncio.Event()
    harness = Harness([_long_tool(half, resume)], lane=LANE, pacing=Pacing(min_interval=0.01))
    early = Lanes()
    harness.bus.add_listener(early.handle)
    early_sub = early.host(LANE).subscribe()
    run = asyncio.create_task(harness.run([ToolCall("call-1", "long", {})], run_id="run-1"))
    try:
        await asyncio.wait_for(half.wait(), 10)
        await _until(
            lambda: "00200" in (_text(early.host(LANE).view, "call-1") or ""),
            "the early lane has folded the first half",
        )
        late = Lanes()
        harness.bus.add_listener(late.handle)  # a lane attached mid-run
        events = harness.bus.subscribe()  # a bus subscriber attached mid-run
        # The late lane knows the run (its lane) and the running call at once...
        assert late.host(LANE).view["operation"] == {"run_id": "run-1", "status": "running"}
        assert late.host(LANE).view["tools"]["call-1"]["status"] == "running"
        late_sub = late.host(LANE).subscribe()
        # ...and gets the call's current state as a base, while the call is paused.
        await _until(
            lambda: _text(late.host(LANE).view, "call-1") == _text(early.host(LANE).view, "call-1"),
            "the late lane has the running call's current text",
        )
        assert late.host(LANE).view["tools"] == early.host(LANE).view["tools"]
        resume.set()
        await asyncio.wait_for(run, 30)
    finally:
        resume.set()
        if not run.done():
            run.cancel()
    early_view = copy.deepcopy(early.host(LANE).view)
    assert late.host(LANE).view == early_view
    assert "00399" in (_text(early_view, "call-1") or "")
    assert early_view["tools"]["call-1"]["status"] == "ok"

    # The bus subscriber folds to the same view with the plain reducer.
    harness.bus.close()
    folded = new_lane_view(LANE)
    seen = [event async for event in events]
    assert isinstance(seen[0], RunStart) and isinstance(seen[1], ToolStart)
    for event in seen:
        reduce_lane_snapshot(folded, event)
    assert folded == early_view

    # Both lanes' subscriptions replicate their views exactly.
    for sub, lanes in ((early_sub, early), (late_sub, late)):
        decoder, replica = Decoder(), None
        while (batch := sub.next_nowait()) is not None:
            replica = apply(replica, decoder.decode(json.loads(batch.data)))
        assert replica == lanes.host(LANE).view


async def test_attaching_replays_only_what_still_runs() -> None:
    bus = EventBus()
    bus.publish(RunStart("old", lane="a"))
    bus.publish(ToolStart("old", "t", "c0", "bash"))
    bus.publish(ToolEnd("old", "t", "c0", is_error=False))
    bus.publish(RunEnd("old"))
    bus.publish(RunStart("now", lane="b"))
    bus.publish(ToolStart("now", "t", "c1", "bash"))
    rebased: list[str] = []
    remove = bus.rebase_on_attach("c1", lambda: rebased.append("c1"))
    got: list[Any] = []
    bus.add_listener(got.append)
    assert got == [RunStart("now", lane="b"), ToolStart("now", "t", "c1", "bash")]
    assert rebased == ["c1"]
    remove()
    sub = bus.subscribe()
    assert rebased == ["c1"]  # unregistered: no second rebase
    bus.close()
    assert [e async for e in sub] == got


CHUNK = st.lists(st.sampled_from(["x", "\n", "é", "😀", "line\n", "漢字 "]), max_size=12).map(
    "".join
)


async def _attach_scenario(
    chunks: list[str], attach_at: int, policy: OutputPolicy, detail: bool
) -> None:
    reached, go = asyncio.Event(), asyncio.Event()

    @tool(params=_Params, name="chunks", output=policy)
    async def chunked(
        tool_call_id: str, params: _Params, cancel: Any, out: Any, context: Any
    ) -> None:
        """Writes the chunks, pausing where the late lane attaches."""
        for i, chunk in enumerate(chunks):
            if i == attach_at:
                reached.set()
                await go.wait()
            out.write(chunk)
            if detail:
                out.details["n"] = i
            await asyncio.sleep(0)

    harness = Harness([chunked], lane=LANE, pacing=Pacing(min_interval=0.001))
    early = Lanes()
    harness.bus.add_listener(early.handle)
    run = asyncio.create_task(harness.run([ToolCall("c", "chunks", {})], run_id="r"))
    try:
        await asyncio.wait_for(reached.wait(), 10)
        late = Lanes()
        harness.bus.add_listener(late.handle)
        go.set()
        await asyncio.wait_for(run, 10)
    finally:
        go.set()
        if not run.done():
            run.cancel()
    assert late.host(LANE).view == early.host(LANE).view


@settings(max_examples=40, deadline=None)
@given(
    chunks=st.lists(CHUNK, min_size=1, max_size=20),
    attach_at=st.integers(0, 20),
    max_bytes=st.integers(4, 120),
    max_lines=st.integers(1, 6),
    retain=st.sampled_from(["head", "tail", "head_tail"]),
    detail=st.booleans(),
)
def test_a_lane_attached_at_any_point_of_a_call_converges(
    chunks: list[str], attach_at: int, max_bytes: int, max_lines: int, retain: Any, detail: bool
) -> None:
    if retain == "head_tail":  # one of each cap for each part
        max_lines = max(max_lines, 2)
    policy = OutputPolicy(max_bytes=max_bytes, max_lines=max_lines, retain=retain)
    # While the call runs (a lane attached after it settled is told nothing of it).
    asyncio.run(_attach_scenario(chunks, attach_at % len(chunks), policy, detail))
