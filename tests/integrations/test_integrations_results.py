"""What each adapter hands its framework for a settled call, checked in process without
running a framework's agent loop: the text, the images, the error status, the refusal of
arguments that are not JSON, and the turn a call runs under. A one-line slip here changes
what the model sees, so these pin each shape exactly (they also let `dev.py mutate
integrations` run in seconds a mutant)."""

from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace
from typing import Any

import pytest
from integrations_helpers import NoParams, finish, flaky

from toolfold.harness import ToolContext, ToolResult, ToolStart, tool
from toolfold.integrations import ToolLoop
from toolfold.output import ToolOutput, image_block

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(24))
PNG64 = base64.b64encode(PNG).decode()


@tool(params=NoParams)
async def picture(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Draws two pictures."""
    out.write("two pictures:\n")
    out.image(image_block(PNG, "image/png"))
    out.image(image_block(PNG[:12], "image/gif"))


@tool(params=NoParams)
async def plain(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes a line."""
    out.write("just text\n")


def result(content: list[dict[str, Any]], *, is_error: bool = False) -> ToolResult:
    return ToolResult(tool_call_id="c1", tool_name="t", content=content, is_error=is_error)


TEXT = {"type": "text", "text": "seen\n"}
IMAGE = {"type": "image", "data": PNG64, "mime_type": "image/png"}


def test_openai_agents_tool_output_is_the_text_or_the_text_and_each_image() -> None:
    from agents.tool import ToolOutputImage, ToolOutputText

    from toolfold.integrations.openai_agents import tool_output

    assert tool_output(result([TEXT])) == "seen\n"
    assert tool_output(result([TEXT, {"type": "other"}])) == "seen\n"
    shaped = tool_output(result([TEXT, IMAGE, {"type": "other"}, IMAGE]))
    assert shaped == [
        ToolOutputText(text="seen\n"),
        ToolOutputImage(image_url=f"data:image/png;base64,{PNG64}"),
        ToolOutputImage(image_url=f"data:image/png;base64,{PNG64}"),
    ]
    # A failed call is its error text alone, images or not.
    assert tool_output(result([TEXT, IMAGE], is_error=True)) == "seen\n"


def test_langgraph_message_is_the_text_or_text_and_image_blocks_with_the_error_status() -> None:
    from toolfold.integrations.langgraph import message_for

    message = message_for(result([TEXT]))
    assert (message.content, message.status) == ("seen\n", "success")
    assert (message.tool_call_id, message.name) == ("c1", "t")
    failed = message_for(result([TEXT, {"type": "other"}], is_error=True))
    assert (failed.content, failed.status) == ("seen\n", "error")
    with_images = message_for(result([TEXT, IMAGE, {"type": "other"}, IMAGE]))
    block = {"type": "image", "base64": PNG64, "mime_type": "image/png"}
    assert with_images.content == [{"type": "text", "text": "seen\n"}, block, block]
    assert with_images.status == "success"


def agents_context(call_id: str, requests: int) -> Any:
    return SimpleNamespace(tool_call_id=call_id, usage=SimpleNamespace(requests=requests))


async def test_openai_agents_function_tools_run_the_call_in_its_turn_or_refuse_bad_json() -> None:
    from toolfold.integrations.openai_agents import function_tools

    loop = ToolLoop([plain, picture, flaky], active=["plain", "flaky"])
    turns: dict[str, str] = {}
    loop.bus.add_listener(
        lambda e: turns.__setitem__(e.tool_call_id, e.turn_id) if isinstance(e, ToolStart) else None
    )
    tools = {t.name: t for t in function_tools(loop)}
    assert list(tools) == ["plain", "picture", "flaky"]
    shown = tools["plain"]
    assert shown.description == "Writes a line."
    assert shown.params_json_schema == plain.json_schema()
    assert shown.strict_json_schema is False
    enabled = [t.is_enabled(None, None) for t in tools.values()]  # type: ignore[operator,arg-type]
    assert enabled == [True, False, True]
    async with loop:
        # No argument text at all is an empty object; the first request is turn 1.
        assert await shown.on_invoke_tool(agents_context("c1", 0), "  ") == "just text\n"
        assert await shown.on_invoke_tool(agents_context("c2", 3), "{}") == "just text\n"
        refused = await shown.on_invoke_tool(agents_context("c3", 1), "{not json")
        failed = await tools["flaky"].on_invoke_tool(agents_context("c4", 2), "")
    assert refused.startswith("Invalid arguments for tool 'plain' (not JSON: Expecting ")
    assert refused.endswith("); the tool was not run.")
    assert turns == {"c1": "turn-1", "c2": "turn-3", "c4": "turn-2"}  # c3 never ran
    assert failed.startswith("partial before failure\n") and "disk on fire" in failed


async def test_openai_agents_stop_on_terminate_ends_with_the_terminating_calls_text() -> None:
    from toolfold.integrations.openai_agents import stop_on_terminate

    loop = ToolLoop([plain, finish])
    behavior = stop_on_terminate(loop)
    async with loop:
        await loop.call("plain", {}, "c1", turn_id="turn-1")
        going = behavior(None, [])  # type: ignore[arg-type]
        await asyncio.gather(
            loop.call("plain", {}, "c2", turn_id="turn-2"),
            loop.call("finish", {}, "c3", turn_id="turn-2"),
        )
        stopped = behavior(None, [])  # type: ignore[arg-type]
    assert going.is_final_output is False
    assert stopped.is_final_output is True and stopped.final_output == "finished the job\n"


async def test_pydantic_ai_call_tool_returns_text_images_or_raises_the_error_text() -> None:
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.messages import BinaryContent

    from toolfold.integrations.pydantic_ai import ToolfoldToolset

    loop = ToolLoop([plain, picture, flaky])
    turns: dict[str, str] = {}
    loop.bus.add_listener(
        lambda e: turns.__setitem__(e.tool_call_id, e.turn_id) if isinstance(e, ToolStart) else None
    )
    toolset = ToolfoldToolset(loop)
    ctx: Any = SimpleNamespace(tool_call_id="c1", run_step=2)
    async with loop:
        assert await toolset.call_tool("plain", {}, ctx, None) == "just text\n"  # type: ignore[arg-type]
        shaped = await toolset.call_tool(
            "picture",
            {},
            SimpleNamespace(tool_call_id=None, run_step=4),  # type: ignore[arg-type]
            None,  # type: ignore[arg-type]
        )
        with pytest.raises(ToolFailed) as caught:
            await toolset.call_tool(
                "flaky",
                {},
                SimpleNamespace(tool_call_id="c3", run_step=5),  # type: ignore[arg-type]
                None,  # type: ignore[arg-type]
            )
    assert shaped == [
        "two pictures:\n",
        BinaryContent(data=PNG, media_type="image/png"),
        BinaryContent(data=PNG[:12], media_type="image/gif"),
    ]
    assert str(caught.value).startswith("partial before failure\n")
    assert "disk on fire" in str(caught.value)
    assert turns == {"c1": "turn-2", "picture-4": "turn-4", "c3": "turn-5"}
