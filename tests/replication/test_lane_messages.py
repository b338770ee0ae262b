"""The lane folds assistant messages and tool calls into one view: a replica of the
lane (over the wire codec) holds each message exactly as it was settled."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from toolfold.chord import Decoder, apply
from toolfold.harness import (
    EventBus,
    Lanes,
    MessageWriter,
    RunStart,
    ToolLoop,
    new_lane_view,
    reduce_lane_snapshot,
)


async def test_a_lane_replica_holds_the_messages_and_the_calls_they_asked_for() -> None:
    bus = EventBus()
    lanes = Lanes()
    bus.add_listener(lanes.handle)
    sub = lanes.host("agent").subscribe()
    plain = new_lane_view("agent")
    bus.add_listener(lambda e: reduce_lane_snapshot(plain, e))
    bus.publish(RunStart("r1", "agent"))
    async with MessageWriter(bus=bus, run_id="r1", turn_id="t1", message_id="m1") as w:
        for i in range(50):
            w.out.text(f"part {i}, ")
            await asyncio.sleep(0)
        w.out.tool_call(0, id="c1", name="echo", arguments='{"x": 1}')
        w.out.end("tool_calls")
    loop = ToolLoop([], bus=bus, run_id="r1", lane="agent")
    await loop.call("echo", {"x": 1}, "c1", turn_id="t1")  # not a tool of the loop: an error
    async with MessageWriter(bus=bus, run_id="r1", turn_id="t2", message_id="m2") as w2:
        w2.out.text("done")
    replica: Any = None
    decoder = Decoder()
    while (batch := sub.next_nowait()) is not None:
        replica = apply(replica, decoder.decode(json.loads(batch.data)))
    for view in (replica, plain):
        assert view["message_order"] == ["m1", "m2"]
        assert view["messages"]["m1"]["output"] == w.message
        assert view["messages"]["m1"]["status"] == "ok"
        assert view["messages"]["m1"]["stop_reason"] == "tool_calls"
        assert view["messages"]["m2"]["output"]["content"] == [{"type": "text", "text": "done"}]
        [call] = [
            p for p in view["messages"]["m1"]["output"]["content"] if p["type"] == "tool_call"
        ]
        assert call["id"] == "c1"


def test_settled_messages_past_the_bound_leave_the_view() -> None:
    from toolfold.harness import MessageEnd, MessageStart, MessageUpdate

    view = new_lane_view("l")
    for i in range(5):
        mid = f"m{i}"
        reduce_lane_snapshot(view, MessageStart("r", "t", mid), settled_tools=2)
        reduce_lane_snapshot(
            view, MessageUpdate("r", "t", mid, [["r", {"content": []}]]), settled_tools=2
        )
        reduce_lane_snapshot(view, MessageEnd("r", "t", mid, "stop"), settled_tools=2)
    assert view["message_order"] == ["m3", "m4"]
    assert sorted(view["messages"]) == ["m3", "m4"]
