"""The reference agent loop against a scripted OpenAI-compatible server on loopback,
driven by the real ``openai`` client: one fold, tools, bad streams, endless tools."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel
from scripted_server import ScriptedServer, text_chunks, tool_chunks

from toolfold.agent import AgentError, History, continue_agent, run_agent
from toolfold.chord import apply
from toolfold.execenv import LocalExecEnv
from toolfold.harness import (
    EventBus,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolCall,
    ToolContext,
    ToolLoop,
    ToolStart,
    tool,
)
from toolfold.output import ToolOutput
from toolfold.storage import MemoryRepository
from toolfold.tools import builtin_tools


class NoParams(BaseModel):
    pass


@tool(params=NoParams)
async def finish(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Ends the run."""
    out.write("finished\n")
    out.terminate(True)


def client(server: ScriptedServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key="test-key", max_retries=0)


def make_loop(tmp_path: Path, **kwargs: Any) -> ToolLoop:
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    return ToolLoop([*builtin_tools(), finish], context=context, **kwargs)


async def test_two_tool_calls_run_and_the_next_request_carries_their_bounded_results(
    tmp_path: Path,
) -> None:
    script = [
        tool_chunks(
            [("c1", "bash", {"command": "seq 1 100000"}), ("c2", "bash", {"command": "echo two"})]
        ),
        text_chunks("All done."),
    ]
    loop = make_loop(tmp_path)
    async with ScriptedServer(script) as server:
        result = await run_agent("count", client=client(server), model="scripted", loop=loop)
    assert result.stop == "answer" and result.answer == "All done." and result.turns == 2
    second = server.requests[1]["messages"]
    tool_messages = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    by_id = {r.tool_call_id: r.text for r in loop.results}
    assert tool_messages == by_id
    assert len(tool_messages["c1"].encode()) < 60 * 1024 and "Full output:" in tool_messages["c1"]
    assert tool_messages["c2"] == "two\n"
    [assistant] = [m for m in second if m["role"] == "assistant"]
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [
        '{"command": "seq 1 100000"}',
        '{"command": "echo two"}',
    ]
    assert result.model_usage == {"prompt_tokens": 16, "completion_tokens": 10, "total_tokens": 26}


async def test_a_subscriber_fold_equals_the_transcript_at_every_step(tmp_path: Path) -> None:
    session = await MemoryRepository().open_session("s", create=True)
    bus = EventBus()
    folds: dict[str, Any] = {}
    checks: list[bool] = []

    def listen(event: Any) -> None:
        if isinstance(event, MessageUpdate):
            folds[event.message_id] = apply(folds.get(event.message_id), event.ops)
        if isinstance(event, MessageEnd):
            checks.append(event.message_id in folds)

    bus.add_listener(listen)
    loop = make_loop(tmp_path, bus=bus, session=session)
    script = [
        tool_chunks([("c1", "bash", {"command": "echo hi"})]),
        text_chunks("The answer is 42.", 2),
    ]
    async with ScriptedServer(script) as server:
        result = await run_agent(
            "q", client=client(server), model="scripted", loop=loop, session=session
        )
    assert result.answer == "The answer is 42."
    entries = [e.value for e in await session.read_entries() if e.value["role"] == "assistant"]
    assert len(entries) == 2 and all(checks) and len(checks) == 2
    for entry in entries:
        folded = folds[entry["message_id"]]
        assert folded["content"] == entry["content"]
        assert folded["stop_reason"] == entry["stop_reason"]
    assert await session.live_scopes() == []


@pytest.mark.parametrize("bad", ["DROP", "{not json"])
async def test_a_broken_stream_is_a_clear_error_and_the_partial_message_is_kept(
    tmp_path: Path, bad: str
) -> None:
    session = await MemoryRepository().open_session("s", create=True)
    chunks = [*text_chunks("Half an answer", 2)[:4], bad]
    loop = make_loop(tmp_path, session=session)
    async with ScriptedServer([chunks]) as server:
        with pytest.raises(AgentError) as caught:
            await run_agent(
                "q", client=client(server), model="scripted", loop=loop, session=session
            )
    message = str(caught.value)
    assert message.startswith("the model stream failed on turn 1: ")
    assert message.endswith("; the partial message was kept")
    assert f": {type(caught.value.__cause__).__name__}: " in message
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["content"] == [{"type": "text", "text": "Half an "}]
    assert entry["is_error"] is True and entry["stop_reason"] == "error"


async def test_a_model_endpoint_that_is_down_says_nothing_was_received(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port that was free: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)
    session = await MemoryRepository().open_session("s", create=True)
    with pytest.raises(AgentError) as caught:
        await run_agent("q", client=down, model="m", loop=make_loop(tmp_path), session=session)
    message = str(caught.value)
    assert message.startswith("no reply from the model on turn 1 (APIConnectionError: ")
    assert message.endswith("nothing was received: check the endpoint's address and that it runs")
    assert "partial message was kept" not in message


async def test_an_endless_tool_loop_stops_at_max_turns(tmp_path: Path) -> None:
    loop = make_loop(tmp_path)
    started: list[str] = []
    loop.bus.add_listener(lambda e: started.append(e.turn_id) if isinstance(e, ToolStart) else None)
    forever = tool_chunks([("c", "bash", {"command": "true"})])
    async with ScriptedServer([forever], repeat_last=True) as server:
        result = await run_agent(
            "q", client=client(server), model="scripted", loop=loop, max_turns=3
        )
    assert result.stop == "max_turns" and result.turns == 3
    assert len(server.requests) == 3 and len(loop.results) == 3
    # Each turn's calls run under that turn's id; every request offers the loop's tools.
    assert started == ["turn-1", "turn-2", "turn-3"]
    offered = [{"type": "function", "function": d} for d in loop.definitions()]
    assert all(r["tools"] == offered for r in server.requests)


async def test_terminate_ends_the_run(tmp_path: Path) -> None:
    loop = make_loop(tmp_path)
    async with ScriptedServer(
        [tool_chunks([("c1", "finish", {})]), text_chunks("never")]
    ) as server:
        result = await run_agent("q", client=client(server), model="scripted", loop=loop)
    assert result.stop == "terminate" and len(server.requests) == 1


async def test_the_request_and_the_kept_message_hold_what_the_model_was_given_and_sent(
    tmp_path: Path,
) -> None:
    # A call streamed without argument text goes back to the model as "{}" (the API wants
    # a JSON object there); reasoning is kept as thinking; the usage as the server sent it.
    session = await MemoryRepository().open_session("s", create=True)
    loop = make_loop(tmp_path, session=session)
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "finish"}}
    turn = [
        {"choices": [{"index": 0, "delta": {"reasoning_content": "let me see"}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}},
    ]
    async with ScriptedServer([turn]) as server:
        result = await run_agent(
            "q",
            client=client(server),
            model="scripted",
            loop=loop,
            session=session,
            system="Be brief.",
        )
    assert result.stop == "terminate"
    offered = [{"type": "function", "function": d} for d in loop.definitions()]
    assert server.requests == [
        {
            "model": "scripted",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "q"},
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "tools": offered,
        }
    ]
    assistant = result.messages[2]
    assert assistant == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "finish", "arguments": "{}"}}
        ],
    }
    [entry] = [e.value for e in await session.read_entries() if e.value["role"] == "assistant"]
    assert entry["content"][0] == {"type": "thinking", "thinking": "let me see"}
    assert entry["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    assert result.model_usage == entry["usage"]


async def test_a_loop_without_tools_offers_none_and_partial_usage_adds_what_was_sent(
    tmp_path: Path,
) -> None:
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    loop = ToolLoop([], context=context)
    answer = [*text_chunks("Hi.")[:-1], {"choices": [], "usage": {"completion_tokens": 2}}]
    async with ScriptedServer([answer]) as server:
        result = await run_agent("q", client=client(server), model="scripted", loop=loop)
    assert result.answer == "Hi." and "tools" not in server.requests[0]
    assert server.requests[0]["messages"] == [{"role": "user", "content": "q"}]
    assert result.model_usage == {"completion_tokens": 2}


async def test_a_stream_without_finish_reason_is_a_cut_answer_and_says_so(tmp_path: Path) -> None:
    session = await MemoryRepository().open_session("s", create=True)
    cut = [
        c
        for c in text_chunks("Half", 2)
        if not c["choices"] or "finish_reason" not in c["choices"][0]
    ]
    async with ScriptedServer([cut]) as server:
        with pytest.raises(AgentError) as caught:
            await run_agent(
                "q",
                client=client(server),
                model="scripted",
                loop=make_loop(tmp_path),
                session=session,
            )
    assert str(caught.value) == (
        "the model stream failed on turn 1: ConnectionError: the stream ended before the model "
        "finished (no finish_reason); the partial message was kept"
    )


async def test_a_calls_deltas_without_function_and_text_around_reasoning(tmp_path: Path) -> None:
    # Some servers open a call with its id alone; text split by reasoning is one answer.
    session = await MemoryRepository().open_session("s", create=True)
    loop = make_loop(tmp_path, session=session)
    opened = {"index": 0, "id": "c1", "type": "function"}
    named = {"index": 0, "function": {"name": "bash", "arguments": '{"command": '}}
    rest = {"index": 0, "function": {"arguments": '"echo hi"}'}}
    first = [
        {"choices": [{"index": 0, "delta": {"tool_calls": [opened]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [named]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [rest]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    second = [
        {"choices": [{"index": 0, "delta": {"content": "Hel"}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]},
        {"choices": [{"index": 0, "delta": {"content": "lo"}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    starts: list[tuple[str, str]] = []
    loop.bus.add_listener(
        lambda e: starts.append((e.run_id, e.turn_id)) if isinstance(e, MessageStart) else None
    )
    async with ScriptedServer([first, second]) as server:
        result = await run_agent(
            "q", client=client(server), model="scripted", loop=loop, session=session
        )
    assert result.answer == "Hello" and result.messages[-1] == {
        "role": "assistant",
        "content": "Hello",
    }
    call = result.messages[1]["tool_calls"][0]
    assert call["function"] == {"name": "bash", "arguments": '{"command": "echo hi"}'}
    assert result.messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "hi\n"}
    assert starts == [(loop.run_id, "turn-1"), (loop.run_id, "turn-2")]
    stops = [
        e.value["stop_reason"]
        for e in await session.read_entries()
        if e.value["role"] == "assistant"
    ]
    assert stops == ["tool_calls", "stop"]
    assert result.tool_usage == {}


async def test_continue_runs_the_unanswered_calls_first_in_their_turn(tmp_path: Path) -> None:
    loop = make_loop(tmp_path)
    turns: dict[str, str] = {}
    loop.bus.add_listener(
        lambda e: turns.__setitem__(e.tool_call_id, e.turn_id) if isinstance(e, ToolStart) else None
    )
    asked = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [asked]},
    ]
    history = History(
        list(messages),
        turns=1,
        unanswered=[ToolCall("c1", "bash", {"command": "echo resumed"})],
        turn_id="turn-1",
    )
    async with ScriptedServer([text_chunks("ok")]) as server:
        result = await continue_agent(history, client=client(server), model="scripted", loop=loop)
    assert result.messages is history.messages
    assert (result.stop, result.answer, result.turns) == ("answer", "ok", 2)
    tool_message = {"role": "tool", "tool_call_id": "c1", "content": "resumed\n"}
    assert server.requests[0]["messages"] == [*messages, tool_message]
    assert turns == {"c1": "turn-1"}


async def test_continue_stops_when_an_unanswered_call_terminates_or_no_turn_is_left(
    tmp_path: Path,
) -> None:
    asked = [{"role": "user", "content": "q"}]
    async with ScriptedServer([text_chunks("never")]) as server:
        ended = await continue_agent(
            History(
                list(asked), turns=1, unanswered=[ToolCall("c1", "finish", {})], turn_id="turn-1"
            ),
            client=client(server),
            model="scripted",
            loop=make_loop(tmp_path),
        )
        spent = await continue_agent(
            History(
                list(asked),
                turns=3,
                unanswered=[ToolCall("c2", "bash", {"command": "true"})],
                turn_id="turn-3",
            ),
            client=client(server),
            model="scripted",
            loop=make_loop(tmp_path),
            max_turns=3,
        )
    assert (ended.stop, ended.turns) == ("terminate", 1)
    assert ended.messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "finished\n"}
    assert (spent.stop, spent.turns) == ("max_turns", 3)
    assert server.requests == []
