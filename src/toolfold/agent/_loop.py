"""``run_agent``: model → tools → model on the harness, for any OpenAI-compatible
Chat Completions streaming endpoint (hosted APIs, vLLM, llama.cpp, Ollama).

Kept small on purpose: every assistant message goes through ``MessageWriter``
(ops on the bus, durable with a session), every tool call through ``ToolLoop``
(bounded results, durable, the loop contract), and nothing else.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from toolfold.harness import MessageWriter, ToolCall, ToolLoop, ToolResult
from toolfold.storage import Session

from ._errors import AgentError
from ._history import History, first_messages
from ._tracing import TurnReport, agent_span, end_agent, traced_turn

DEFAULT_MAX_TURNS = 20


@dataclass
class AgentResult:
    """How a run ended, its transcript (Chat Completions messages) and both usages."""

    stop: str
    """``"answer"`` (the model answered without tool calls), ``"terminate"`` (a tool
    ended the run) or ``"max_turns"``."""
    messages: list[dict[str, Any]]
    answer: str = ""
    turns: int = 0
    model_usage: dict[str, int] = field(default_factory=dict)
    tool_usage: dict[str, Any] = field(default_factory=dict)


def _tools(loop: ToolLoop) -> list[dict[str, Any]]:
    return [{"type": "function", "function": d} for d in loop.definitions()]


def _add_usage(total: dict[str, int], usage: Any) -> None:
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        amount = getattr(usage, key, None)
        if isinstance(amount, int):
            total[key] = total.get(key, 0) + amount


async def _one_turn(
    client: Any,
    model: str,
    loop: ToolLoop,
    messages: list[dict[str, Any]],
    writer: MessageWriter,
    model_usage: dict[str, int],
    report: TurnReport,
) -> None:
    tools = _tools(loop)
    request: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        request["tools"] = tools
    stream = await client.chat.completions.create(**request)
    finish: str | None = None
    calls: set[int] = set()
    async for chunk in stream:
        if report.first_chunk is None:
            report.first_chunk = time.monotonic()
            report.response_id = getattr(chunk, "id", None) or None
            report.response_model = getattr(chunk, "model", None) or None
        if getattr(chunk, "usage", None) is not None:
            _add_usage(model_usage, chunk.usage)
            report.input_tokens = getattr(chunk.usage, "prompt_tokens", None)
            report.output_tokens = getattr(chunk.usage, "completion_tokens", None)
            writer.out.usage(chunk.usage.model_dump(exclude_none=True))
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                reasoning = getattr(delta, "reasoning_content", None)
                if isinstance(reasoning, str):
                    writer.out.thinking(reasoning)
                if delta.content:
                    writer.out.text(delta.content)
                for call in delta.tool_calls or ():
                    calls.add(call.index)
                    fn = call.function
                    writer.out.tool_call(
                        call.index,
                        id=call.id,
                        name=fn.name if fn is not None else None,
                        arguments=(fn.arguments or "") if fn is not None else "",
                    )
            if choice.finish_reason:
                finish = choice.finish_reason
    report.finish, report.tool_calls = finish, len(calls)
    if finish is None:
        # A server that drops the connection ends the SSE stream without an error:
        # only the missing finish_reason tells a cut answer from a whole one.
        raise ConnectionError("the stream ended before the model finished (no finish_reason)")
    writer.out.end(finish)


async def run_agent(
    task: str,
    *,
    client: Any,
    model: str,
    loop: ToolLoop,
    session: Session | None = None,
    system: str | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
) -> AgentResult:
    """Run ``task``: stream the model's answer, run its tool calls through ``loop``,
    feed their bounded results back, until it answers without tools, a tool sets
    ``terminate``, or ``max_turns`` model turns were made. ``client`` is an
    ``openai.AsyncOpenAI``; ``session`` makes the assistant messages durable (give
    the loop the same one for the tool calls)."""
    return await continue_agent(
        History(first_messages(task, system)),
        client=client,
        model=model,
        loop=loop,
        session=session,
        max_turns=max_turns,
    )


async def continue_agent(
    history: History,
    *,
    client: Any,
    model: str,
    loop: ToolLoop,
    session: Session | None = None,
    max_turns: int = DEFAULT_MAX_TURNS,
) -> AgentResult:
    """Go on from ``history`` (``rebuild_history`` of a run a crash cut short): its
    unanswered tool calls run first, then model turns until ``max_turns`` in all."""
    # The run's invoke_agent span, when tracing: its model turns and tool calls are
    # its children.
    with agent_span(model, client, loop.run_id) as span:
        result = await _continue(
            history, client=client, model=model, loop=loop, session=session, max_turns=max_turns
        )
        if span is not None:
            end_agent(span, result.stop, result.turns, result.model_usage)
    return result


async def _continue(
    history: History,
    *,
    client: Any,
    model: str,
    loop: ToolLoop,
    session: Session | None,
    max_turns: int,
) -> AgentResult:
    messages = history.messages
    result = AgentResult(stop="max_turns", messages=messages, turns=history.turns)
    async with loop:
        if history.unanswered and await _run_calls(
            loop, history.unanswered, history.turn_id, messages
        ):
            result.stop = "terminate"
        for turn in range(history.turns + 1, max_turns + 1):
            if result.stop == "terminate":
                break
            result.turns = turn
            writer = MessageWriter(
                bus=loop.bus, run_id=loop.run_id, turn_id=f"turn-{turn}", session=session
            )
            try:
                async with writer:
                    await traced_turn(
                        model,
                        client,
                        writer.turn_id,
                        partial(
                            _one_turn, client, model, loop, messages, writer, result.model_usage
                        ),
                    )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not (writer.message or {}).get("content"):
                    # Nothing arrived: the endpoint was not reached or refused the request.
                    raise AgentError(
                        f"no reply from the model on turn {turn} ({type(exc).__name__}: {exc}); "
                        "nothing was received: check the endpoint's address and that it runs"
                    ) from exc
                raise AgentError(
                    f"the model stream failed on turn {turn}: {type(exc).__name__}: {exc}; "
                    "the partial message was kept"
                ) from exc
            calls = writer.tool_calls()
            text = (writer.message or {}).get("content", [])
            answer = "".join(p["text"] for p in text if p.get("type") == "text")
            entry: dict[str, Any] = {"role": "assistant", "content": answer or None}
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _arguments(writer, c.id)},
                    }
                    for c in calls
                ]
            messages.append(entry)
            if not calls:
                result.stop, result.answer = "answer", answer
                break
            if await _run_calls(loop, calls, f"turn-{turn}", messages):
                result.stop = "terminate"
    result.tool_usage = dict(loop.usage)
    return result


async def _run_calls(
    loop: ToolLoop, calls: list[ToolCall], turn_id: str, messages: list[dict[str, Any]]
) -> bool:
    """Run ``calls`` concurrently, append their bounded results; True: a tool terminated."""
    results: list[ToolResult] = await asyncio.gather(
        *(loop.call(c.name, c.args, c.id, turn_id=turn_id) for c in calls)
    )
    for r in results:
        messages.append({"role": "tool", "tool_call_id": r.tool_call_id, "content": r.text})
    return loop.terminated


def _arguments(writer: MessageWriter, call_id: str) -> str:
    for part in (writer.message or {}).get("content", []):
        if part.get("type") == "tool_call" and part.get("id") == call_id:
            return str(part.get("arguments") or "{}")
    return "{}"
