"""Under a framework, toolfold's execute_tool span is a child of the span current where
the framework runs the tool call (its own span for that call, when it traces its steps):
one trace shows both."""

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


async def test_a_langgraph_run_nests_the_calls_under_the_span_the_graph_runs_in(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    # LangGraph traces nothing itself (LangSmith records its runs after the fact, not
    # as current OpenTelemetry spans), so the spans around a graph are the
    # application's: one for the run, one per model step here. LangGraph runs each node
    # in a task of its own; the calls' spans must still land under the run's span, as
    # siblings of the model step that asked for them, not inside it.
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, AnyMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from toolfold.integrations.langgraph import route_after_tools, tool_node

    tracer = trace.get_tracer("an application")
    script = iter(
        [
            AIMessage(
                "",
                tool_calls=[
                    {"name": "bash", "args": {"command": "seq 1 3"}, "id": "c1"},
                    {"name": "bash", "args": {"command": "echo two"}, "id": "c2"},
                ],
            ),
            AIMessage("done"),
        ]
    )
    model = GenericFakeChatModel(messages=script)

    async def call_model(state: dict[str, Any]) -> dict[str, list[AnyMessage]]:
        with tracer.start_as_current_span("model step"):
            return {"messages": [await model.ainvoke(state["messages"])]}

    def after_model(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    loop = ToolLoop(builtin_tools(), context=context)
    graph: Any = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", tool_node(loop))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", after_model, ["tools", END])
    graph.add_conditional_edges(
        "tools", route_after_tools(loop, model_node="model"), ["model", END]
    )
    compiled = graph.compile()
    async with loop:
        with tracer.start_as_current_span("graph run") as run:
            state = await compiled.ainvoke({"messages": [("user", "go")]})
    assert state["messages"][-1].content == "done"
    finished = spans.get_finished_spans()
    calls = {
        dict(s.attributes or {})["gen_ai.tool.call.id"]: s
        for s in finished
        if s.name == "execute_tool bash"
    }
    assert set(calls) == {"c1", "c2"}
    assert dict(calls["c1"].attributes or {})["toolfold.output.total_lines"] == 3
    for call in calls.values():
        assert call.parent is not None and call.parent.span_id == run.get_span_context().span_id
    # The model steps are the run's children too, and hold no call.
    steps = {s.context.span_id for s in finished if s.name == "model step"}
    assert len(steps) == 2
    assert all(
        s.parent is not None and s.parent.span_id == run.get_span_context().span_id
        for s in finished
        if s.name == "model step"
    )
    assert not any(c.parent is not None and c.parent.span_id in steps for c in calls.values())
    commands = [s for s in finished if s.name == "toolfold.exec"]
    assert {c.parent.span_id for c in commands if c.parent is not None} == {
        call.context.span_id for call in calls.values()
    }
    assert {s.context.trace_id for s in finished} == {run.get_span_context().trace_id}
