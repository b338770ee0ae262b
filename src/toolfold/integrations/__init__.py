"""Adapters that put toolfold tools under the agent loops people already run.

- ``toolfold.integrations.pydantic_ai`` (extra ``pydantic-ai``): a pydantic-ai toolset;
- ``toolfold.integrations.openai_agents`` (extra ``openai-agents``): ``FunctionTool``s
  and a ``tool_use_behavior`` for the OpenAI Agents SDK;
- ``toolfold.integrations.langgraph`` (extra ``langgraph``): LangChain tools, a tool
  node and a router for LangGraph.

Each adapter module imports its framework; this package imports none, so
``ToolLoop`` (the run-side state every adapter shares) is usable without any.
Nothing else in toolfold imports this package.
"""

from __future__ import annotations

from ._errors import IntegrationError, ToolNotAvailableError
from ._loop import ToolLoop, model_images

__all__ = ["IntegrationError", "ToolLoop", "ToolNotAvailableError", "model_images"]
