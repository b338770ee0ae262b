"""``run_agent`` traced after the GenAI conventions (docs/observability.md): one
``invoke_agent`` span per run, a ``chat {model}`` span per model turn with the usage the
server reported, the tool calls' ``execute_tool`` spans under the agent's span, and the
GenAI client metrics; against the scripted server on loopback, with the real client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from openai import AsyncOpenAI
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from scripted_server import ScriptedServer, text_chunks, tool_chunks

from otel_fixture import points
from toolfold.agent import AgentError, run_agent
from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext, ToolLoop
from toolfold.tools import builtin_tools


def make_loop(tmp_path: Path) -> ToolLoop:
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    return ToolLoop(builtin_tools(), context=context)


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


async def test_a_run_is_an_agent_span_with_a_chat_span_per_turn_and_its_tool_calls(
    spans: InMemorySpanExporter, metrics: InMemoryMetricReader, tmp_path: Path
) -> None:
    script = [tool_chunks([("c1", "bash", {"command": "seq 1 3"})]), text_chunks("Done.")]
    async with ScriptedServer(script) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        result = await run_agent("count", client=client, model="scripted", loop=make_loop(tmp_path))
    assert result.stop == "answer" and result.turns == 2
    [agent] = named(spans, "invoke_agent toolfold")
    agent_attrs = dict(agent.attributes or {})
    assert agent.kind is SpanKind.INTERNAL
    assert agent_attrs["gen_ai.operation.name"] == "invoke_agent"
    assert agent_attrs["gen_ai.agent.name"] == "toolfold"
    assert agent_attrs["gen_ai.provider.name"] == "openai"
    assert agent_attrs["gen_ai.request.model"] == "scripted"
    assert agent_attrs["server.address"] == "127.0.0.1"
    assert agent_attrs["gen_ai.usage.input_tokens"] == 5 + 11
    assert agent_attrs["gen_ai.usage.output_tokens"] == 3 + 7
    assert (agent_attrs["toolfold.agent.stop"], agent_attrs["toolfold.agent.turns"]) == (
        "answer",
        2,
    )
    turns = named(spans, "chat scripted")
    assert len(turns) == 2
    for turn in turns:
        assert turn.kind is SpanKind.CLIENT
        assert turn.parent is not None and turn.parent.span_id == agent.context.span_id
    first, second = (
        dict(t.attributes or {}) for t in sorted(turns, key=lambda t: t.start_time or 0)
    )
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.request.model"] == "scripted"
    assert first["gen_ai.request.stream"] is True
    assert (first["toolfold.turn.id"], second["toolfold.turn.id"]) == ("turn-1", "turn-2")
    assert first["server.address"] == "127.0.0.1" and isinstance(first["server.port"], int)
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (5, 3)
    assert first["toolfold.message.tool_calls"] == 1
    assert first["gen_ai.response.time_to_first_chunk"] >= 0
    assert second["gen_ai.response.finish_reasons"] == ("stop",)
    assert (second["gen_ai.usage.input_tokens"], second["gen_ai.usage.output_tokens"]) == (11, 7)
    assert second["toolfold.message.tool_calls"] == 0
    # The tool call runs under the agent's span (beside the turns), its command under it.
    [call] = named(spans, "execute_tool bash")
    assert call.parent is not None and call.parent.span_id == agent.context.span_id
    [command] = named(spans, "toolfold.exec")
    assert command.parent is not None and command.parent.span_id == call.context.span_id
    assert {s.context.trace_id for s in spans.get_finished_spans()} == {agent.context.trace_id}
    # The convention's client metrics: one duration per turn, tokens by type.
    [duration] = points(metrics, "gen_ai.client.operation.duration")
    assert duration.count == 2
    assert dict(duration.attributes or {})["gen_ai.operation.name"] == "chat"
    tokens = {
        dict(p.attributes or {})["gen_ai.token.type"]: p.sum
        for p in points(metrics, "gen_ai.client.token.usage")
    }
    assert tokens == {"input": 16, "output": 10}
    [first_chunk] = points(metrics, "gen_ai.client.operation.time_to_first_chunk")
    assert first_chunk.count == 2 and first_chunk.min >= 0
    [run] = points(metrics, "gen_ai.invoke_agent.duration")
    assert run.count == 1
    assert dict(run.attributes or {}) == {
        "gen_ai.agent.name": "toolfold",
        "gen_ai.request.model": "scripted",
    }


async def test_a_broken_stream_fails_its_chat_span_and_the_agent_span(
    spans: InMemorySpanExporter, metrics: InMemoryMetricReader, tmp_path: Path
) -> None:
    chunks = [*text_chunks("Half an answer", 2)[:4], "DROP"]
    async with ScriptedServer([chunks]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(AgentError, match="the model stream failed on turn 1"):
            await run_agent("q", client=client, model="scripted", loop=make_loop(tmp_path))
    [turn] = named(spans, "chat scripted")
    assert turn.status.status_code is StatusCode.ERROR
    error = dict(turn.attributes or {})["error.type"]
    assert error  # the stream's own exception class
    assert "gen_ai.response.finish_reasons" not in dict(turn.attributes or {})
    [agent] = named(spans, "invoke_agent toolfold")
    assert agent.status.status_code is StatusCode.ERROR
    assert dict(agent.attributes or {})["error.type"] == "AgentError"
    [duration] = points(metrics, "gen_ai.client.operation.duration")
    assert dict(duration.attributes or {})["error.type"] == error
    [run] = points(metrics, "gen_ai.invoke_agent.duration")
    assert dict(run.attributes or {})["error.type"] == "AgentError"


async def test_a_turn_reports_the_first_chunks_response_id_and_model_and_only_the_usage_sent(
    spans: InMemorySpanExporter, metrics: InMemoryMetricReader, tmp_path: Path
) -> None:
    # The server names the model that answered (it may differ from the one asked for);
    # a later chunk's id or model does not replace the first's; a usage without
    # completion_tokens reports no output tokens rather than a made-up count.
    answer = text_chunks("Done.")
    answer[0] = {**answer[0], "id": "resp-1", "model": "served-model"}
    answer[1] = {**answer[1], "id": "resp-2", "model": "other-model"}
    answer[-1] = {"choices": [], "usage": {"prompt_tokens": 4}}
    loop = make_loop(tmp_path)
    async with ScriptedServer([answer]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        await run_agent("q", client=client, model="scripted", loop=loop)
    [turn] = named(spans, "chat scripted")
    attrs = dict(turn.attributes or {})
    assert attrs["gen_ai.response.id"] == "resp-1"
    assert attrs["gen_ai.response.model"] == "served-model"
    assert attrs["gen_ai.usage.input_tokens"] == 4
    assert "gen_ai.usage.output_tokens" not in attrs
    [agent] = named(spans, "invoke_agent toolfold")
    agent_attrs = dict(agent.attributes or {})
    assert agent_attrs["gen_ai.conversation.id"] == loop.run_id
    assert agent_attrs["gen_ai.usage.input_tokens"] == 4
    assert "gen_ai.usage.output_tokens" not in agent_attrs
    [duration] = points(metrics, "gen_ai.client.operation.duration")
    assert dict(duration.attributes or {})["gen_ai.response.model"] == "served-model"
    tokens = {
        dict(p.attributes or {})["gen_ai.token.type"]: p.sum
        for p in points(metrics, "gen_ai.client.token.usage")
    }
    assert tokens == {"input": 4}


async def test_an_empty_response_id_or_model_is_left_out(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    # A first chunk with an empty id and model, and one without them (sent as is).
    answer = text_chunks("Done.")
    answer[0] = {**answer[0], "id": "", "model": ""}
    bare = [
        json.dumps({"object": "chat.completion.chunk", "created": 0, **text_chunks("Done.")[0]})
    ]
    async with ScriptedServer([answer, bare + text_chunks("Done.")[1:]]) as server:
        for _ in range(2):
            client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
            await run_agent("q", client=client, model="scripted", loop=make_loop(tmp_path))
    turns = named(spans, "chat scripted")
    assert len(turns) == 2
    for turn in turns:
        attrs = dict(turn.attributes or {})
        assert "gen_ai.response.id" not in attrs and "gen_ai.response.model" not in attrs


async def test_a_turn_counts_each_of_its_tool_calls(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    calls = [("c1", "bash", {"command": "true"}), ("c2", "bash", {"command": "true"})]
    async with ScriptedServer([tool_chunks(calls), text_chunks("Done.")]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        await run_agent("q", client=client, model="scripted", loop=make_loop(tmp_path))
    first, _ = sorted(named(spans, "chat scripted"), key=lambda t: t.start_time or 0)
    assert dict(first.attributes or {})["toolfold.message.tool_calls"] == 2
