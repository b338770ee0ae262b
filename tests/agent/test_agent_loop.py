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

from toolfold.agent import AgentError, run_agent
from toolfold.chord import apply
from toolfold.execenv import LocalExecEnv
from toolfold.harness import (
    EventBus,
    MessageEnd,
    MessageUpdate,
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
        with pytest.raises(
            AgentError, match=r"the model stream failed on turn 1: .*partial message was kept"
        ):
            await run_agent(
                "q", client=client(server), model="scripted", loop=loop, session=session
            )
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
    answer = [*text_chunks("Hi.")[:-1], {"choices": [], "usage": {"prompt_tokens": 4}}]
    async with ScriptedServer([answer]) as server:
        result = await run_agent("q", client=client(server), model="scripted", loop=loop)
    assert result.answer == "Hi." and "tools" not in server.requests[0]
    assert server.requests[0]["messages"] == [{"role": "user", "content": "q"}]
    assert result.model_usage == {"prompt_tokens": 4}
