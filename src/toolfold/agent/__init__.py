"""``toolfold.agent``: a small reference agent loop on the harness (extra ``agent``).

``run_agent(task, client=AsyncOpenAI(...), model=..., loop=ToolLoop(...))`` streams
each model turn through ``MessageWriter`` (assistant output as ops, durable with
a session) and each tool call through ``ToolLoop`` (bounded results, durable, the
loop contract: ``terminate`` ends the run, ``add_tools`` changes the next turn's
tools, ``usage`` is summed), until the model answers or ``max_turns`` is reached.
"""

from __future__ import annotations

from ._errors import AgentError
from ._history import (
    History,
    agent_run_address,
    agent_run_record,
    first_messages,
    rebuild_history,
)
from ._loop import DEFAULT_MAX_TURNS, AgentResult, continue_agent, run_agent

__all__ = [
    "DEFAULT_MAX_TURNS",
    "AgentError",
    "AgentResult",
    "History",
    "agent_run_address",
    "agent_run_record",
    "continue_agent",
    "first_messages",
    "rebuild_history",
    "run_agent",
]
