"""toolfold tools for the OpenAI Agents SDK (extra ``openai-agents``).

``function_tools(loop)`` gives one ``FunctionTool`` per tool of the loop; each is
enabled while the tool is active (``is_enabled``), so ``add_tools`` exposes a tool
from the next model turn. A call returns the bounded text (and images); a failed
call returns its error text as a string, the SDK's convention for an error the
model should see, so the run goes on. ``stop_on_terminate(loop)`` is a
``tool_use_behavior`` that stops the run at the result of the tool batch in which
a call set ``terminate``; :func:`run` wires both and returns both usages.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    FunctionToolResult,
    RunContextWrapper,
    Runner,
    RunResult,
    ToolsToFinalOutputResult,
)
from agents import (
    Usage as AgentsUsage,
)
from agents.tool import ToolOutputImage, ToolOutputText
from agents.tool_context import ToolContext as AgentsToolContext

from toolfold.harness import Tool, ToolLoop, ToolResult
from toolfold.output import Usage

__all__ = ["AgentsRunOutcome", "function_tools", "run", "stop_on_terminate", "tool_output"]


def tool_output(result: ToolResult) -> Any:
    """What the model sees for a settled call: its text, or text + images."""
    images = [b for b in result.content[1:] if b.get("type") == "image"]
    if not images or result.is_error:
        return result.text
    return [
        ToolOutputText(text=result.text),
        *(ToolOutputImage(image_url=f"data:{b['mime_type']};base64,{b['data']}") for b in images),
    ]


def _function_tool(loop: ToolLoop, tool: Tool[Any]) -> FunctionTool:
    name = tool.name

    async def invoke(ctx: AgentsToolContext[Any], args_json: str) -> Any:
        try:
            args = json.loads(args_json) if args_json.strip() else {}
        except json.JSONDecodeError as exc:
            # Not run through the harness: the arguments never reached the tool.
            return f"Invalid arguments for tool {name!r} (not JSON: {exc}); the tool was not run."
        result = await loop.call(
            name, args, ctx.tool_call_id, turn_id=f"turn-{max(ctx.usage.requests, 1)}"
        )
        return tool_output(result)

    def enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
        return name in loop.active

    return FunctionTool(
        name=name,
        description=tool.description,
        params_json_schema=tool.json_schema(),
        on_invoke_tool=invoke,
        # toolfold validates with the tool's own pydantic params; strict mode would
        # make the SDK rewrite the schema (every property required, no defaults).
        strict_json_schema=False,
        is_enabled=enabled,
    )


def function_tools(loop: ToolLoop) -> list[FunctionTool]:
    """Every tool of the loop as a ``FunctionTool``, enabled while it is active."""
    return [_function_tool(loop, t) for t in loop.tools.values()]


def stop_on_terminate(loop: ToolLoop) -> Any:
    """A ``tool_use_behavior``: stop at this batch's results once a call set
    ``terminate`` (the final output is the terminating call's text)."""

    def behavior(
        ctx: RunContextWrapper[Any], results: list[FunctionToolResult]
    ) -> ToolsToFinalOutputResult:
        if not loop.terminated:
            return ToolsToFinalOutputResult(is_final_output=False)
        ids = {r.tool_call_id for r in loop.results if r.terminate}
        final = next((r.text for r in loop.results if r.tool_call_id in ids), None)
        return ToolsToFinalOutputResult(is_final_output=True, final_output=final)

    return behavior


@dataclass(frozen=True)
class AgentsRunOutcome:
    """What :func:`run` returns: the SDK's result and both usages side by side."""

    result: RunResult
    terminated: bool
    usage: AgentsUsage
    """The SDK's own usage (model requests and tokens)."""
    tool_usage: Usage
    """Usage the tools reported (e.g. a subagent's tokens), summed over the run."""


async def run(agent: Agent[Any], input: str, loop: ToolLoop, **kwargs: Any) -> AgentsRunOutcome:
    """Run ``agent`` with the loop's tools added and ``stop_on_terminate`` as its
    ``tool_use_behavior`` (a clone; ``agent`` itself is not changed)."""
    tools = [t for t in agent.tools if getattr(t, "name", None) not in loop.tools]
    wired = agent.clone(
        tools=[*tools, *function_tools(loop)], tool_use_behavior=stop_on_terminate(loop)
    )
    async with loop:
        result = await Runner.run(wired, input, **kwargs)
    return AgentsRunOutcome(
        result=result,
        terminated=loop.terminated,
        usage=result.context_wrapper.usage,
        tool_usage=loop.usage.copy(),
    )
