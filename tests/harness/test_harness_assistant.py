"""Assistant output as ops: ``AssistantOutput`` streams fold to the message at every
step, and ``MessageWriter`` emits start / updates (first a base) / end."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.chord import apply, is_base
from toolfold.harness import (
    EventBus,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    MessageWriter,
    ToolCall,
)
from toolfold.output import AssistantOutput, OutputClosedError

TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)
DELTA = st.one_of(
    st.tuples(st.just("text"), TEXT),
    st.tuples(st.just("thinking"), TEXT),
    st.tuples(st.just("call"), st.integers(0, 2), TEXT),
    st.tuples(st.just("take"), st.integers(0, 1)),
    st.tuples(st.just("rebase"), st.integers(0, 1)),
)


def feed(out: AssistantOutput, step: tuple[Any, ...]) -> None:
    kind = step[0]
    if kind == "text":
        out.text(step[1])
    elif kind == "thinking":
        out.thinking(step[1])
    elif kind == "call":
        out.tool_call(step[1], id=f"call-{step[1]}", name="bash", arguments=step[2])


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(DELTA, max_size=60))
def test_every_stream_folds_to_the_message_at_every_take(steps: list[tuple[Any, ...]]) -> None:
    out = AssistantOutput()
    streams = [out.open_stream(), out.open_stream()]
    replicas: list[Any] = [None, None]
    for step in steps:
        if step[0] == "take":
            i = step[1]
            batch = streams[i].take()
            if replicas[i] is None:
                assert is_base(batch)
            replicas[i] = apply(replicas[i], batch)
            assert replicas[i] == out.snapshot()
        elif step[0] == "rebase":
            streams[step[1]].rebase()
        else:
            feed(out, step)
    out.end("stop")
    for i, stream in enumerate(streams):
        replicas[i] = apply(replicas[i], stream.take())
        assert replicas[i] == out.snapshot()
    assert out.snapshot()["stop_reason"] == "stop"


def test_parts_keep_their_order_and_tool_call_arguments_stream() -> None:
    out = AssistantOutput()
    out.thinking("let me ")
    out.thinking("think")
    out.text("I will run ")
    out.tool_call(0, id="c1", name="bash", arguments='{"comm')
    out.text("and ")
    out.tool_call(0, arguments='and": "ls"}')
    out.end("tool_calls")
    assert out.snapshot()["content"] == [
        {"type": "thinking", "thinking": "let me think"},
        {"type": "text", "text": "I will run "},
        {
            "type": "tool_call",
            "index": 0,
            "id": "c1",
            "name": "bash",
            "arguments": '{"command": "ls"}',
        },
        {"type": "text", "text": "and "},
    ]
    assert out.text_so_far == "I will run and "
    with pytest.raises(OutputClosedError, match=r"text\(\) after the message ended"):
        out.text("late")


async def test_message_writer_events_fold_to_the_settled_message() -> None:
    bus = EventBus()
    events: list[Any] = []
    bus.add_listener(events.append)
    async with MessageWriter(bus=bus, run_id="r", turn_id="t1", message_id="m1") as writer:
        for i in range(200):
            writer.out.text(f"word{i} ")
            await asyncio.sleep(0)
        writer.out.tool_call(0, id="c1", name="bash", arguments='{"command": "ls"}')
        writer.out.end("tool_calls")
    assert isinstance(events[0], MessageStart)
    assert isinstance(events[-1], MessageEnd)
    assert events[-1].stop_reason == "tool_calls" and not events[-1].is_error
    updates = [e for e in events if isinstance(e, MessageUpdate)]
    assert is_base(updates[0].ops)
    folded: Any = None
    for update in updates:
        folded = apply(folded, update.ops)
    assert folded == writer.message
    assert writer.tool_calls() == [ToolCall("c1", "bash", {"command": "ls"})]


async def test_an_exception_while_generating_keeps_the_partial_message() -> None:
    bus = EventBus()
    ends: list[Any] = []
    bus.add_listener(lambda e: ends.append(e) if isinstance(e, MessageEnd) else None)
    with pytest.raises(ConnectionError):
        async with MessageWriter(bus=bus, run_id="r", turn_id="t1") as writer:
            writer.out.text("half an ans")
            raise ConnectionError("stream dropped")
    assert writer.message is not None
    assert writer.message["content"] == [{"type": "text", "text": "half an ans"}]
    assert writer.message["error"] == "ConnectionError: stream dropped"
    assert [(e.stop_reason, e.is_error) for e in ends] == [("error", True)]
