"""The tools the CLI's harnesses know: the built-ins (``bash`` with the user's limits)
and the demo's memoising tool, so ``toolfold resume`` can re-run it seeded."""

from __future__ import annotations

import dataclasses
from typing import Any

from toolfold.harness import Tool
from toolfold.output import OutputPolicy
from toolfold.tools import BASH, BashParams, bash_tool


def cli_bash(
    policy: OutputPolicy | None = None, *, max_spill: int | None = None
) -> Tool[BashParams]:
    """The ``bash`` tool with ``policy`` and a ``max_spill`` cap when given. All that
    ``toolfold run`` needs: it imports neither the other tools nor pydantic."""
    tool = BASH if max_spill is None else bash_tool(max_spill=max_spill)
    return tool if policy is None else dataclasses.replace(tool, output=policy)


def offered_tools(
    bash_policy: OutputPolicy | None = None, *, max_spill: int | None = None
) -> list[Tool[Any]]:
    """The documented built-in tools (``bash`` with ``bash_policy`` and a ``max_spill``
    cap when given): what a model is offered (``toolfold agent``)."""
    from toolfold.tools import builtin_tools

    tools: list[Tool[Any]] = []
    for tool in builtin_tools():
        if tool.name == BASH.name:
            tool = cli_bash(bash_policy, max_spill=max_spill)
        tools.append(tool)
    return tools


def cli_tools(
    bash_policy: OutputPolicy | None = None, *, max_spill: int | None = None
) -> list[Tool[Any]]:
    """``offered_tools`` plus ``demo_steps``, the demo's memoising tool: what the CLI's
    harnesses that settle stored calls know (``resume``, ``serve``'s janitor), so that a
    demo call left by a crash can be re-run seeded. Never offered to a model."""
    from ._demo_steps import DEMO_STEPS

    return [*offered_tools(bash_policy, max_spill=max_spill), DEMO_STEPS]
