"""Spans and metrics of ``run_agent`` (docs/observability.md), after OpenTelemetry's
GenAI conventions:

- ``invoke_agent toolfold`` (kind INTERNAL: the agent runs in this process) around a
  whole run; the tool calls' ``execute_tool`` spans are its children;
- ``chat {gen_ai.request.model}`` (kind CLIENT) around each model turn: one streamed
  Chat Completions request and the assistant message it produced, with the usage the
  server reported;
- ``gen_ai.client.operation.duration``, ``gen_ai.client.operation.time_to_first_chunk``
  and ``gen_ai.client.token.usage`` per turn, ``gen_ai.invoke_agent.duration`` per run.

Neither prompts nor answers are recorded (``gen_ai.input.messages`` and
``gen_ai.output.messages`` are opt-in in the convention: they may hold secrets). Nothing
here runs without a tracer or meter provider (``toolfold._otel``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolfold import _otel
from toolfold._otel import AttrValue

if TYPE_CHECKING:
    from opentelemetry.trace import Span

PROVIDER = "openai"
"""``gen_ai.provider.name``: the client speaks OpenAI's Chat Completions API, whoever
serves it (the convention names the API's provider when the server is not known)."""

AGENT_NAME = "toolfold"


@dataclass
class TurnReport:
    """What one streamed model turn reported (filled in while the chunks arrive)."""

    finish: str | None = None
    response_id: str | None = None
    response_model: str | None = None
    first_chunk: float | None = None
    """``time.monotonic()`` when the first chunk arrived."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    tool_calls: int = 0


def _server(client: Any) -> dict[str, AttrValue]:
    url = getattr(client, "base_url", None)
    host, port = getattr(url, "host", None), getattr(url, "port", None)
    found: dict[str, AttrValue] = {}
    if isinstance(host, str) and host:
        found["server.address"] = host
        if isinstance(port, int):
            found["server.port"] = port
    return found


def _request(model: str, client: Any, operation: str) -> dict[str, AttrValue]:
    return {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDER,
        "gen_ai.request.model": model,
        **_server(client),
    }


@contextmanager
def agent_span(model: str, client: Any, run_id: str) -> Iterator[Span | None]:
    """The run's ``invoke_agent`` span (``None`` when tracing is off), current inside,
    and its ``gen_ai.invoke_agent.duration`` when metrics are on."""
    tracer, meters = _otel.tracer(), _otel.meters()
    if tracer is None and meters is None:
        yield None
        return
    started = time.monotonic()
    error: str | None = None
    try:
        if tracer is None:
            yield None
        else:
            attributes = _request(model, client, "invoke_agent")
            attributes["gen_ai.agent.name"] = AGENT_NAME
            attributes["gen_ai.conversation.id"] = run_id
            with _otel.span(tracer, f"invoke_agent {AGENT_NAME}", attributes) as span:
                yield span
    except BaseException as exc:
        error = type(exc).__qualname__
        raise
    finally:
        if meters is not None:
            measured: dict[str, AttrValue] = {
                "gen_ai.agent.name": AGENT_NAME,
                "gen_ai.request.model": model,
            }
            if error is not None:
                measured["error.type"] = error
            meters.agent_duration.record(time.monotonic() - started, measured)


def end_agent(span: Span, stop: str, turns: int, usage: dict[str, int]) -> None:
    """How the run ended, and the usage of all its turns."""
    attributes: dict[str, AttrValue] = {"toolfold.agent.stop": stop, "toolfold.agent.turns": turns}
    if "prompt_tokens" in usage:
        attributes["gen_ai.usage.input_tokens"] = usage["prompt_tokens"]
    if "completion_tokens" in usage:
        attributes["gen_ai.usage.output_tokens"] = usage["completion_tokens"]
    span.set_attributes(attributes)


async def traced_turn(
    model: str, client: Any, turn_id: str, run: Callable[[TurnReport], Awaitable[None]]
) -> None:
    """Run one model turn (``run`` fills the report in) inside its ``chat`` span, and
    record its duration and token usage; just run it when nobody listens."""
    tracer, meters = _otel.tracer(), _otel.meters()
    report = TurnReport()
    if tracer is None and meters is None:
        await run(report)
        return
    attributes = _request(model, client, "chat")
    started = time.monotonic()
    opened: AbstractContextManager[Span | None] = nullcontext()
    if tracer is not None:
        span_attributes = {**attributes, "gen_ai.request.stream": True, "toolfold.turn.id": turn_id}
        opened = _otel.span(tracer, f"chat {model}", span_attributes, internal=False)
    error: str | None = None
    try:
        with opened as span:
            try:
                await run(report)
            finally:
                if span is not None:
                    span.set_attributes(_reported(report, started))
    except BaseException as exc:
        error = type(exc).__qualname__
        raise
    finally:
        if meters is not None:
            _record(meters, attributes, report, started, error)


def _reported(report: TurnReport, started: float) -> dict[str, AttrValue | list[str]]:
    found: dict[str, AttrValue | list[str]] = {"toolfold.message.tool_calls": report.tool_calls}
    if report.finish is not None:
        found["gen_ai.response.finish_reasons"] = [report.finish]  # one choice
    if report.response_id is not None:
        found["gen_ai.response.id"] = report.response_id
    if report.response_model is not None:
        found["gen_ai.response.model"] = report.response_model
    if report.first_chunk is not None:
        found["gen_ai.response.time_to_first_chunk"] = report.first_chunk - started
    if report.input_tokens is not None:
        found["gen_ai.usage.input_tokens"] = report.input_tokens
    if report.output_tokens is not None:
        found["gen_ai.usage.output_tokens"] = report.output_tokens
    return found


def _record(
    meters: _otel.Meters,
    request: dict[str, AttrValue],
    report: TurnReport,
    started: float,
    error: str | None,
) -> None:
    duration = time.monotonic() - started
    attributes = dict(request)
    if report.response_model is not None:
        attributes["gen_ai.response.model"] = report.response_model
    if error is not None:
        attributes["error.type"] = error
    meters.genai_duration.record(duration, attributes)
    if report.first_chunk is not None:
        meters.genai_first_chunk.record(report.first_chunk - started, request)
    for kind, tokens in (("input", report.input_tokens), ("output", report.output_tokens)):
        if tokens is not None:
            meters.genai_tokens.record(tokens, {**attributes, "gen_ai.token.type": kind})
