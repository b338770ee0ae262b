"""Under a framework that traces its own steps, toolfold's execute_tool span is a child
of the framework's span for that tool call: one trace shows both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext
from toolfold.integrations import ToolLoop
from toolfold.tools import builtin_tools


async def test_a_pydantic_ai_run_nests_the_call_under_the_agents_tool_span(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    from pydantic_ai import Agent, InstrumentationSettings
    from pydantic_ai.capabilities import Instrumentation
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolfold.integrations.pydantic_ai import run

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("bash", {"command": "seq 1 3"}, "c1")])
        return ModelResponse(parts=[TextPart("done")])

    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    loop = ToolLoop(builtin_tools(), context=context)
    # pydantic-ai's own tracing, on the same provider (as Logfire would set it up).
    traced = Instrumentation(InstrumentationSettings(tracer_provider=trace.get_tracer_provider()))
    outcome = await run(Agent(FunctionModel(model), capabilities=[traced]), "go", loop)
    assert outcome.output == "done"
    finished = {s.context.span_id: s for s in spans.get_finished_spans()}
    # pydantic-ai names its own tool span by the same convention; ours is toolfold's scope.
    [call] = [
        s
        for s in finished.values()
        if s.instrumentation_scope is not None
        and s.instrumentation_scope.name == "toolfold"
        and s.name == "execute_tool bash"
    ]
    assert dict(call.attributes or {})["gen_ai.tool.call.id"] == "c1"
    assert dict(call.attributes or {})["toolfold.output.total_lines"] == 3
    # Its parent is pydantic-ai's own span for running this tool, inside the agent run.
    assert call.parent is not None
    parent = finished[call.parent.span_id]
    assert parent.instrumentation_scope is not None
    assert parent.instrumentation_scope.name != "toolfold"
    assert parent.name == "execute_tool bash"
    assert dict(parent.attributes or {}).get("gen_ai.tool.call.id") == "c1"
    chain = []
    node = parent
    while node.parent is not None:
        node = finished[node.parent.span_id]
        chain.append(node.name)
    assert any("agent" in name for name in chain), (parent.name, chain)
    assert {s.context.trace_id for s in finished.values()} == {call.context.trace_id}
