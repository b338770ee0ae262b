"""Adapters that put toolfold tools under the agent loops people already run.

- ``toolfold.integrations.pydantic_ai`` (extra ``pydantic-ai``): a pydantic-ai toolset;
- ``toolfold.integrations.openai_agents`` (extra ``openai-agents``): ``FunctionTool``s
  and a ``tool_use_behavior`` for the OpenAI Agents SDK;
- ``toolfold.integrations.langgraph`` (extra ``langgraph``): LangChain tools, a tool
  node and a router for LangGraph.

Each adapter module imports its framework; this package imports none.
``ToolLoop`` (the run-side state every adapter shares) is the harness's
(``toolfold.harness.ToolLoop``), re-exported here.
Nothing else in toolfold imports this package.
"""

from __future__ import annotations

from toolfold.harness import ToolLoop, ToolNotAvailableError, model_images

from ._errors import IntegrationError

__all__ = ["IntegrationError", "ToolLoop", "ToolNotAvailableError", "model_images"]
