"""A LangGraph graph of the user's own, whose model node is not called ``model``: the edge
after the tools must lead back to it, not end the run silently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from integrations_helpers import TEST_TOOLS
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext
from toolfold.integrations import ToolLoop
from toolfold.integrations.langgraph import route_after_tools, tool_node


def _graph(loop: ToolLoop, model: GenericFakeChatModel, name: str) -> Any:
    async def call_model(state: dict[str, Any]) -> dict[str, list[AnyMessage]]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def after_model(state: dict[str, Any]) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph: Any = StateGraph(MessagesState)
    graph.add_node(name, call_model)
    graph.add_node("tools", tool_node(loop))
    graph.add_edge(START, name)
    graph.add_conditional_edges(name, after_model, ["tools", END])
    graph.add_conditional_edges("tools", route_after_tools(loop, model_node=name), [name, END])
    return graph.compile()


async def test_the_run_returns_to_a_model_node_of_any_name(tmp_path: Path) -> None:
    loop = ToolLoop(TEST_TOOLS, context=ToolContext(env=LocalExecEnv(tmp_path), cwd=tmp_path))
    script = iter(
        [
            AIMessage("", tool_calls=[{"name": "spend", "args": {}, "id": "c1"}]),
            AIMessage("done after the tools"),
        ]
    )
    graph = _graph(loop, GenericFakeChatModel(messages=script), "agent")
    async with loop:
        state = await graph.ainvoke({"messages": [("user", "go")]})
    assert state["messages"][-1].content == "done after the tools"


def test_the_model_node_must_be_named(tmp_path: Path) -> None:
    loop = ToolLoop(TEST_TOOLS, context=ToolContext(env=LocalExecEnv(tmp_path), cwd=tmp_path))
    with pytest.raises(TypeError, match="model_node"):
        route_after_tools(loop)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="must be the name of the graph's model node"):
        route_after_tools(loop, model_node="")
