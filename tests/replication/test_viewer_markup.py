"""Markup in what the viewer shows is shown as text, never parsed: a tool's name, its
arguments, its output, and an assistant message's text, reasoning and tool calls — in
headless Chromium. Each place gets a payload that would create elements (and run a
script) if the viewer ever assigned it as HTML."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel

from toolfold.harness import (
    EventBus,
    Lanes,
    MessageWriter,
    RunStart,
    ToolContext,
    ToolEnd,
    ToolLoop,
    ToolStart,
    tool,
)
from toolfold.output import ToolOutput
from toolfold.server import create_app


def mark(where: str) -> str:
    """Markup that makes an element with id ``injected-WHERE`` and sets
    ``window.pwned`` if it is ever parsed."""
    return (
        f'<b id="injected-{where}">bold</b>'
        f'<img id="injected-{where}-img" src="x" onerror="window.pwned = {where!r}">'
    )


class Anything(BaseModel):
    x: Any = None


@tool(params=Anything)
async def marked(
    tool_call_id: str, params: Anything, cancel: asyncio.Event, out: ToolOutput, context: Any
) -> None:
    """Writes markup."""
    out.write(mark("output") + "\n")


PLACES = ["name", "args", "output", "text", "thinking", "call"]


def test_markup_in_a_tool_name_its_arguments_and_a_message_creates_no_element(
    browser_context: Any, serve: Any
) -> None:
    lanes = Lanes()
    bus = EventBus()
    bus.add_listener(lanes.handle)
    server = serve(create_app(lanes=lanes))

    async def produce() -> None:
        bus.publish(RunStart("r1", "agent"))
        args = {"x": mark("args")}
        async with MessageWriter(bus=bus, run_id="r1", turn_id="t1", message_id="m1") as w:
            w.out.thinking(mark("thinking"))
            w.out.text(mark("text"))
            w.out.tool_call(0, id="c1", name=mark("call"), arguments=json.dumps(args))
            w.out.tool_call(1, id="c2", name="marked", arguments=json.dumps(args))
            w.out.end("tool_calls")
        loop = ToolLoop([marked], bus=bus, run_id="r1", lane="agent", context=ToolContext())
        # A tool name is whatever the harness publishes (a proxied upstream names its
        # own tools): the lane shows it as given.
        bus.publish(ToolStart("r1", "t1", "c1", tool_name=mark("name"), args=args))
        bus.publish(ToolEnd("r1", "t1", "c1", is_error=True))
        result = await loop.call("marked", args, "c2", turn_id="t1")
        assert not result.is_error, result

    server.run(produce())
    page = browser_context.new_page()
    try:
        page.goto(server.viewer_url("lane=agent"))
        page.wait_for_selector("article.tool.status-ok[data-tool-call-id='c2']")
        page.wait_for_selector("article.message.status-ok")
        unknown = page.inner_text("article[data-tool-call-id='c1']")
        card = page.inner_text("article[data-tool-call-id='c2']")
        message = page.inner_text("article.message")
        # Every payload is on the page, character for character ...
        assert mark("name") in unknown and mark("output") in card
        assert mark("args") in unknown and mark("args") in card
        for where in ("thinking", "text"):
            assert mark(where) in message, where
        assert mark("call") in message
        # ... and none of them made an element or ran a script.
        for where in PLACES:
            for suffix in ("", "-img"):
                assert page.query_selector(f"#injected-{where}{suffix}") is None, where
        assert page.query_selector("article img") is None
        assert page.evaluate("() => window.pwned === undefined")
    finally:
        page.close()
