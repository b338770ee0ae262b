"""toolfold tools under a pydantic-ai ``Agent`` (extra ``pydantic-ai``).

``ToolfoldToolset(loop)`` is a pydantic-ai toolset: it lists the loop's active
tools at every model turn (so ``add_tools`` takes effect on the next turn) and
runs each call through the ``ToolLoop`` (bounded result, live events, durability).
A failed call raises pydantic-ai's ``ToolFailed``: the model sees the error text
and the run goes on. ``run(agent, prompt, loop)`` drives the agent and ends the
run after the tool batch in which a call set ``terminate``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.exceptions import ToolFailed
from pydantic_ai.messages import BinaryContent, ModelMessage
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
from pydantic_ai.usage import RunUsage
from pydantic_core import SchemaValidator, core_schema

from toolfold.harness import ToolLoop, model_images
from toolfold.output import Usage

__all__ = ["AgentRunOutcome", "ToolfoldToolset", "run"]

# Arguments are validated by the toolfold tool itself (its pydantic params), so an
# invalid call settles as a durable, model-visible error like any other failure.
_ANY = SchemaValidator(schema=core_schema.any_schema())


class ToolfoldToolset(AbstractToolset[Any]):
    """The active tools of ``loop`` as a pydantic-ai toolset (pass it in
    ``toolsets=[...]`` to ``Agent``, ``agent.run`` or ``agent.iter``)."""

    def __init__(self, loop: ToolLoop, *, id: str = "toolfold") -> None:
        self.loop = loop
        self._id = id

    @property
    def id(self) -> str | None:
        """The toolset id pydantic-ai uses in error messages."""
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools the model sees this turn (the loop's active tools)."""
        tools: dict[str, ToolsetTool[Any]] = {}
        for d in self.loop.definitions():
            tools[d["name"]] = ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=d["name"],
                    description=d["description"],
                    parameters_json_schema=d["parameters"],
                ),
                max_retries=0,
                args_validator=_ANY,
            )
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run the call; the bounded text (and images), or ``ToolFailed`` with the
        error text for a failed call."""
        result = await self.loop.call(
            name,
            tool_args,
            ctx.tool_call_id or f"{name}-{ctx.run_step}",
            turn_id=f"turn-{ctx.run_step}",
        )
        if result.is_error:
            raise ToolFailed(result.text)
        images = model_images(result)
        if not images:
            return result.text
        return [result.text, *(BinaryContent(data=raw, media_type=mime) for raw, mime in images)]


@dataclass(frozen=True)
class AgentRunOutcome:
    """What :func:`run` returns: the output (``None`` when a tool ended the run),
    the messages, and both usages side by side."""

    output: Any
    messages: list[ModelMessage]
    terminated: bool
    usage: RunUsage
    """The framework's own usage (model requests and tokens)."""
    tool_usage: Usage
    """Usage the tools reported (e.g. a subagent's tokens), summed over the run."""


async def run(
    agent: Agent[Any, Any], prompt: str, loop: ToolLoop, **kwargs: Any
) -> AgentRunOutcome:
    """Run ``agent`` on ``prompt`` with the loop's tools; ends the run after the tool
    batch in which a call set ``terminate`` (the next model request is not made)."""
    toolsets = [*kwargs.pop("toolsets", ()), ToolfoldToolset(loop)]
    async with loop, agent.iter(prompt, toolsets=toolsets, **kwargs) as agent_run:
        async for node in agent_run:
            if loop.terminated and Agent.is_model_request_node(node):
                break
        result = agent_run.result
        return AgentRunOutcome(
            output=result.output if result is not None else None,
            messages=agent_run.all_messages(),
            terminated=loop.terminated,
            usage=agent_run.usage,
            tool_usage=loop.usage.copy(),
        )
