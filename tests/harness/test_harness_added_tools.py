"""``add_tools`` names are checked at call time against the loop's tools."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from toolfold.harness import EventBus, Harness, ToolCall, ToolContext, execute_tool_call, tool
from toolfold.output import ToolOutput


class Empty(BaseModel):
    pass


@tool(params=Empty)
async def adder(
    call_id: str, params: Empty, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Adds a known and an unknown tool."""
    out.write("adding\n")
    out.add_tools(["adder", "ghost"])


@tool(params=Empty)
async def good(
    call_id: str, params: Empty, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Adds a known tool."""
    out.add_tools(["adder"])


async def test_harness_refuses_an_unknown_added_tool_naming_it() -> None:
    [bad, fine] = await Harness([adder, good]).run(
        [ToolCall("c1", "adder"), ToolCall("c2", "good")]
    )
    assert bad.is_error and bad.outcome == "error"
    assert bad.text == (
        "adding\nadd_tools named unknown tool(s) 'ghost'; available tools: adder, good. "
        "No tool was added."
    )
    assert not fine.is_error and fine.added_tools == ["adder"]


async def test_without_known_tools_execute_tool_call_does_not_judge() -> None:
    r = await execute_tool_call(adder, "c1", {}, run_id="r", turn_id="t", bus=EventBus())
    assert not r.is_error and r.added_tools == ["adder", "ghost"]
