"""toolfold tools in a LangGraph graph (extra ``langgraph``: langgraph + langchain-core).

- ``tool_node(loop)``: a graph node that runs the tool calls of the last
  ``AIMessage`` concurrently through the ``ToolLoop`` and returns one
  ``ToolMessage`` per call (bounded text and image blocks; ``status="error"`` for a
  failed call, so the graph goes on). While a call runs, its events go out on the
  graph's ``custom`` stream (``get_stream_writer()``) as ``{"toolfold": ...}``
  dicts carrying the op batches; a client folds them with :class:`StreamFold`.
- ``tool_specs(loop)``: the active tools as OpenAI-format tool dicts for
  ``model.bind_tools`` (bind them per turn: ``add_tools`` changes them).
- ``route_after_tools(loop, model_node=NAME)``: the edge after the tool node (``END`` once a call
  set ``terminate``, else back to the model).
- ``agent_graph(model, loop)``: model → tools → model, with all of the above.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from toolfold.chord import apply
from toolfold.harness import HarnessEvent, ToolEnd, ToolLoop, ToolResult, ToolStart, ToolUpdate
from toolfold.output import output_text

__all__ = [
    "StreamFold",
    "agent_graph",
    "message_for",
    "route_after_tools",
    "tool_node",
    "tool_specs",
]


def tool_specs(loop: ToolLoop) -> list[dict[str, Any]]:
    """The loop's active tools as OpenAI-format tool dicts (``model.bind_tools``)."""
    return [
        {
            "type": "function",
            "function": {
                "name": d["name"],
                "description": d["description"],
                "parameters": d["parameters"],
            },
        }
        for d in loop.definitions()
    ]


def message_for(result: ToolResult) -> ToolMessage:
    """The ``ToolMessage`` of a settled call: text plus image blocks, error status."""
    images = [b for b in result.content[1:] if b.get("type") == "image"]
    content: str | list[str | dict[str, Any]] = result.text
    if images:
        content = [{"type": "text", "text": result.text}]
        content += [
            {"type": "image", "base64": b["data"], "mime_type": b["mime_type"]} for b in images
        ]
    return ToolMessage(
        content=content,
        tool_call_id=result.tool_call_id,
        name=result.tool_name,
        status="error" if result.is_error else "success",
    )


def _event_json(event: HarnessEvent) -> dict[str, Any] | None:
    if isinstance(event, ToolStart):
        return {
            "type": "tool_start",
            "tool_call_id": event.tool_call_id,
            "tool_name": event.tool_name,
        }
    if isinstance(event, ToolUpdate):
        return {"type": "tool_update", "tool_call_id": event.tool_call_id, "ops": event.ops}
    if isinstance(event, ToolEnd):
        return {"type": "tool_end", "tool_call_id": event.tool_call_id, "is_error": event.is_error}
    return None


def tool_node(loop: ToolLoop) -> Callable[[dict[str, Any]], Any]:
    """A node running the last ``AIMessage``'s tool calls through ``loop``."""

    async def tools(state: dict[str, Any]) -> dict[str, list[AnyMessage]]:
        messages: Sequence[AnyMessage] = state["messages"]
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or not last.tool_calls:
            return {"messages": []}
        try:
            writer = get_stream_writer()
        except RuntimeError:  # run outside a graph (a direct call in a test)
            writer = None
        turn = sum(1 for m in messages if isinstance(m, AIMessage))

        def forward(event: HarnessEvent) -> None:
            data = _event_json(event)
            if data is not None and writer is not None:
                writer({"toolfold": data})

        results = await asyncio.gather(
            *(
                loop.call(
                    call["name"],
                    call["args"],
                    call["id"] or f"{call['name']}-{turn}-{i}",
                    turn_id=f"turn-{turn}",
                    on_event=forward,
                )
                for i, call in enumerate(last.tool_calls)
            )
        )
        return {"messages": [message_for(r) for r in results]}

    return tools


def route_after_tools(loop: ToolLoop, *, model_node: str) -> Callable[[dict[str, Any]], str]:
    """The edge after the tool node: back to ``model_node`` (the name your graph gave its
    model node), or ``END`` once a call set ``terminate``.

    The name is required: a route to a node the graph does not have makes LangGraph
    end the run silently after the tools (it only logs a write to an unknown channel).
    """
    if not isinstance(model_node, str) or not model_node:
        raise ValueError(
            f"route_after_tools: model_node must be the name of the graph's model node, "
            f"got {model_node!r}"
        )

    def route(state: dict[str, Any]) -> str:
        return END if loop.terminated else model_node

    return route


def _route_after_model(state: dict[str, Any]) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def agent_graph(model: BaseChatModel, loop: ToolLoop) -> CompiledStateGraph[Any, Any, Any, Any]:
    """model → tools → model until the model answers without tool calls or a call
    sets ``terminate``. The model is bound to the loop's active tools at every turn,
    so ``add_tools`` takes effect on the next one."""

    async def call_model(state: dict[str, Any]) -> dict[str, list[AnyMessage]]:
        specs = tool_specs(loop)
        bound: Any = model.bind_tools(specs) if specs else model
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph: Any = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", tool_node(loop))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", _route_after_model, ["tools", END])
    graph.add_conditional_edges(
        "tools", route_after_tools(loop, model_node="model"), ["model", END]
    )
    compiled: CompiledStateGraph[Any, Any, Any, Any] = graph.compile()
    return compiled


class StreamFold:
    """A client's fold of the ``custom`` stream: each call's state, from its op batches
    (the first one a base), with ``toolfold.chord.apply``."""

    def __init__(self) -> None:
        self.states: dict[str, Any] = {}
        self.ended: dict[str, bool] = {}

    def feed(self, chunk: Any) -> None:
        """Apply one ``custom`` stream chunk (others are ignored)."""
        data = chunk.get("toolfold") if isinstance(chunk, dict) else None
        if not isinstance(data, dict):
            return
        call = str(data.get("tool_call_id"))
        if data.get("type") == "tool_update":
            self.states[call] = apply(self.states.get(call), data["ops"])
        elif data.get("type") == "tool_end":
            self.ended[call] = bool(data.get("is_error"))

    def text(self, tool_call_id: str) -> str:
        """The folded text of one call (what its ``ToolMessage`` carries)."""
        return output_text(self.states.get(tool_call_id))
