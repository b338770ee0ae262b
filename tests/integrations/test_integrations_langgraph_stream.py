"""LangGraph's native stream: the ``custom`` events carry each call's op batches, and a
client that folds them with ``toolfold.chord`` gets exactly the ``ToolMessage`` text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage

from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext
from toolfold.integrations import ToolLoop
from toolfold.integrations.langgraph import StreamFold, agent_graph
from toolfold.tools import builtin_tools


class FakeModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


async def test_custom_stream_events_fold_to_the_tool_messages(tmp_path: Path) -> None:
    model = FakeModel(
        messages=iter(
            [
                AIMessage(
                    "",
                    tool_calls=[
                        {"name": "bash", "args": {"command": "seq 1 40000"}, "id": "c1"},
                        {"name": "bash", "args": {"command": "echo out; exit 4"}, "id": "c2"},
                    ],
                ),
                AIMessage("done"),
            ]
        )
    )
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    loop = ToolLoop(builtin_tools(), context=context)
    graph = agent_graph(model, loop)
    fold = StreamFold()
    chunks = 0
    final: dict[str, Any] = {}
    async with loop:
        async for mode, chunk in graph.astream(
            {"messages": [("user", "go")]}, stream_mode=["custom", "values"]
        ):
            if mode == "custom":
                chunks += 1
                fold.feed(chunk)
            else:
                final = chunk
    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in tool_messages] == ["c1", "c2"]
    for m in tool_messages:
        assert fold.text(m.tool_call_id) == m.content
    assert fold.ended == {"c1": False, "c2": True}
    assert tool_messages[1].status == "error"
    assert chunks >= 6  # start, at least one update and an end per call
