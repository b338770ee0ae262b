"""Helpers of the adapter tests: test tools, and one scripted driver per framework.

A script is a list of model turns; a turn is a list of ``(tool_call_id, tool, args)``
calls or a final text. Each driver runs the framework's own agent loop on its
offline model and records what the model *received*: the tool results as the next
request carries them, and the tools it was offered at each turn.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolfold.harness import ToolContext, ToolError, tool
from toolfold.integrations import ToolLoop
from toolfold.output import ToolOutput

# The CLI tests' subprocess helpers (toolfold, wait_for, pending_text), by basename.
sys.path.append(str(Path(__file__).resolve().parents[1] / "cli"))

FRAMEWORKS = ["pydantic_ai", "langgraph", "openai_agents"]

Turn = list[tuple[str, str, dict[str, Any]]] | str


class NoParams(BaseModel):
    pass


@tool(params=NoParams)
async def flaky(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes a line, then fails."""
    out.write("partial before failure\n")
    raise ToolError("disk on fire")


@tool(params=NoParams)
async def finish(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Ends the run."""
    out.write("finished the job\n")
    out.terminate(True)


@tool(params=NoParams)
async def opener(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Makes the secret tool available."""
    out.write("opened\n")
    out.add_tools(["secret"])


@tool(params=NoParams)
async def bad_opener(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Asks for a tool that does not exist."""
    out.write("trying\n")
    out.add_tools(["nope"])


@tool(params=NoParams)
async def secret(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Only available after opener."""
    out.write("the secret is 42\n")


@tool(params=NoParams)
async def spend(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Reports the usage of a subagent."""
    out.usage({"input_tokens": 7, "output_tokens": 3, "cost": 0.25})
    out.write("spent\n")


class Gate:
    """Set by ``hang`` once its first line is written (no sleeps as synchronisation)."""

    reached: asyncio.Event | None = None


@tool(params=NoParams)
async def hang(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes a line, then waits until it is cancelled."""
    out.write("partial before the stop\n")
    if Gate.reached is not None:
        Gate.reached.set()
    await asyncio.Event().wait()


TEST_TOOLS = [flaky, finish, opener, bad_opener, secret, spend, hang]


@dataclass
class Transcript:
    """What the model received, per framework run."""

    seen: dict[str, str] = field(default_factory=dict)
    """tool_call_id -> the result text the next model request carried."""
    errors: dict[str, bool] = field(default_factory=dict)
    """tool_call_id -> whether the framework marked the result as an error."""
    offered: list[list[str]] = field(default_factory=list)
    """The tool names offered to the model, per model turn."""
    turns: int = 0
    final: Any = None
    framework_usage: Any = None


async def drive(framework: str, loop: ToolLoop, script: list[Turn]) -> Transcript:
    """Run ``script`` through ``framework``'s agent loop with ``loop``'s tools."""
    runner = {"pydantic_ai": _pydantic_ai, "langgraph": _langgraph, "openai_agents": _agents}
    return await runner[framework](loop, list(script))


# --------------------------------------------------------------------------- pydantic-ai


async def _pydantic_ai(loop: ToolLoop, script: list[Turn]) -> Transcript:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from toolfold.integrations.pydantic_ai import run

    t = Transcript()

    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        t.turns += 1
        t.offered.append([d.name for d in info.function_tools])
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, ToolReturnPart):
                    content = part.content
                    t.seen[part.tool_call_id] = (
                        content if isinstance(content, str) else str(content[0])
                    )
                    t.errors[part.tool_call_id] = part.outcome == "failed"
        turn = script.pop(0)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(
            parts=[ToolCallPart(name, args, tool_call_id=cid) for cid, name, args in turn]
        )

    outcome = await run(Agent(FunctionModel(model)), "go", loop)
    t.final = outcome.output
    t.framework_usage = outcome.usage
    return t


# --------------------------------------------------------------------------- LangGraph


async def _langgraph(loop: ToolLoop, script: list[Turn]) -> Transcript:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage

    from toolfold.integrations.langgraph import agent_graph

    t = Transcript()

    class Scripted(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            t.offered.append([spec["function"]["name"] for spec in tools])
            return self

        async def ainvoke(self, messages: Any, *args: Any, **kwargs: Any) -> Any:
            t.turns += 1
            if len(t.offered) < t.turns:
                t.offered.append([])
            tail: list[ToolMessage] = []
            for m in reversed(messages):
                if not isinstance(m, ToolMessage):
                    break
                tail.append(m)
            for m in tail:
                content = m.content
                t.seen[m.tool_call_id] = (
                    content if isinstance(content, str) else str(content[0]["text"])  # type: ignore[index]
                )
                t.errors[m.tool_call_id] = m.status == "error"
            return await super().ainvoke(messages, *args, **kwargs)

    def message(turn: Turn) -> AIMessage:
        if isinstance(turn, str):
            return AIMessage(turn)
        return AIMessage("", tool_calls=[{"name": n, "args": a, "id": cid} for cid, n, a in turn])

    graph = agent_graph(Scripted(messages=iter([message(turn) for turn in script])), loop)
    async with loop:
        state = await graph.ainvoke({"messages": [("user", "go")]})
    last = state["messages"][-1]
    t.final = last.content if isinstance(last, AIMessage) else None
    return t


# --------------------------------------------------------------------------- Agents SDK


async def _agents(loop: ToolLoop, script: list[Turn]) -> Transcript:
    from agents import Agent, Model, ModelResponse, Usage, set_tracing_disabled
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    from toolfold.integrations.openai_agents import run

    set_tracing_disabled(True)
    t = Transcript()

    class Scripted(Model):
        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: Any,
            output_schema: Any,
            handoffs: Any,
            tracing: Any,
            **kwargs: Any,
        ) -> ModelResponse:
            t.turns += 1
            t.offered.append([tool.name for tool in tools])
            for item in input if isinstance(input, list) else []:
                if isinstance(item, dict) and item.get("type") == "function_call_output":
                    output = item["output"]
                    text = output if isinstance(output, str) else str(output[0].get("text"))
                    t.seen[item["call_id"]] = text
                    t.errors[item["call_id"]] = False  # the SDK's convention: a string result
            turn = script.pop(0)
            usage = Usage(requests=1, input_tokens=5, output_tokens=2, total_tokens=7)
            if isinstance(turn, str):
                message = ResponseOutputMessage(
                    id="msg",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=turn, annotations=[])],
                )
                return ModelResponse(output=[message], usage=usage, response_id=None)
            calls = [
                ResponseFunctionToolCall(
                    type="function_call",
                    call_id=cid,
                    name=name,
                    arguments=json.dumps(args),
                    id=f"fc_{cid}",
                    status="completed",
                )
                for cid, name, args in turn
            ]
            return ModelResponse(output=list(calls), usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the scripted model answers whole responses only")

    outcome = await run(Agent(name="agent", model=Scripted()), "go", loop)
    t.final = outcome.result.final_output
    t.framework_usage = outcome.usage
    return t
