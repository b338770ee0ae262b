"""The ``execute_tool`` span of a call, its name and attributes, and the call's metrics
(docs/observability.md).

The names follow OpenTelemetry's GenAI semantic conventions for tool execution (span
``execute_tool {gen_ai.tool.name}``, kind INTERNAL, ``gen_ai.operation.name``,
``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type``, ``error.type``);
what only toolfold knows goes under ``toolfold.*``. Nothing here runs unless a tracer
provider is configured (``toolfold._otel``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from toolfold import _otel
from toolfold._otel import AttrValue

from ._result import ToolResult

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from toolfold.output import OutputPolicy, ToolOutput


def tool_span(tracer: Tracer, tool_name: str, tool_call_id: str) -> AbstractContextManager[Span]:
    """The ``execute_tool`` span of one call, current in the calling task."""
    return _otel.span(
        tracer,
        f"execute_tool {tool_name}",
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": tool_call_id,
            # "function": the tool runs on the client side (the harness), as the
            # convention defines it, whatever it does there.
            "gen_ai.tool.type": "function",
        },
    )


def result_attributes(result: ToolResult, policy: OutputPolicy | None) -> dict[str, AttrValue]:
    """What the settled result says: the outcome and the output's truncation."""
    attributes: dict[str, AttrValue] = {
        "toolfold.outcome": result.outcome,
        "toolfold.interrupted": result.outcome == "interrupted",
    }
    if policy is not None:
        attributes["toolfold.output.retain"] = policy.retain
    state = result.state
    if state is not None:
        cut = state["truncation"]
        attributes["toolfold.output.total_bytes"] = cut["total_bytes"]
        attributes["toolfold.output.total_lines"] = cut["total_lines"]
        attributes["toolfold.output.kept_bytes"] = cut["output_bytes"]
        attributes["toolfold.output.kept_lines"] = cut["output_lines"]
        attributes["toolfold.output.truncated"] = cut["truncated"]
        if cut["truncated_by"] is not None:
            attributes["toolfold.output.truncated_by"] = cut["truncated_by"]
        attributes["toolfold.output.spilled"] = "spill_path" in state
    return attributes


def settle_span(span: Span, result: ToolResult, policy: OutputPolicy | None) -> None:
    """Put the settled result on the call's span (``error.type`` = the outcome when it
    is not ``ok``: a low-cardinality value, as the convention asks)."""
    span.set_attributes(result_attributes(result, policy))
    if result.outcome != "ok":
        _otel.fail(span, result.outcome)


def record_call(meters: _otel.Meters, tool_name: str, result: ToolResult, duration: float) -> None:
    """Record a settled call's duration by outcome (the histogram's count is the calls
    by outcome), and the output it wrote against what it kept."""
    attributes: dict[str, AttrValue] = {
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.type": "function",
        "toolfold.outcome": result.outcome,
    }
    if result.outcome != "ok":
        attributes["error.type"] = result.outcome
    meters.tool_duration.record(duration, attributes)
    state = result.state
    if state is not None:
        cut = state["truncation"]
        tool = {"gen_ai.tool.name": tool_name}
        meters.output_seen.add(cut["total_bytes"], tool)
        meters.output_kept.add(cut["output_bytes"], tool)


def record_failure(meters: _otel.Meters, tool_name: str, exc: Exception, duration: float) -> None:
    """Record a call the harness could not settle (an exception escaped it): its
    ``error.type`` is the exception's class, as on its span."""
    attributes: dict[str, AttrValue] = {
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.type": "function",
        "error.type": type(exc).__qualname__,
    }
    meters.tool_duration.record(duration, attributes)


def time_first_output(meters: _otel.Meters, tool_name: str, sink: ToolOutput) -> Callable[[], None]:
    """Record the time from now to the sink's first new output byte (once; a resumed
    call's seed does not count); returns the function that stops watching (a call that
    never writes records nothing)."""
    started = time.monotonic()
    seeded = sink.truncation["total_bytes"]
    unlisten: Callable[[], None] | None = None

    def changed() -> None:
        if sink.truncation["total_bytes"] > seeded and unlisten is not None:
            unlisten()
            meters.first_output.record(time.monotonic() - started, {"gen_ai.tool.name": tool_name})

    unlisten = sink.on_change(changed)
    return unlisten
