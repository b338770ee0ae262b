"""Headless Chromium: the viewer shows an assistant message streaming in (its text and
the tool call it asks for, argument text as it arrives), then the call's own card
under the message once it runs — folded from the lane's ops like any call."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolfold.harness import (
    EventBus,
    Lanes,
    MessageWriter,
    RunStart,
    ToolContext,
    ToolLoop,
    tool,
)
from toolfold.output import ToolOutput
from toolfold.server import create_app


class EchoParams(BaseModel):
    word: str


@tool(params=EchoParams)
async def echo(
    call_id: str, params: EchoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Writes its word."""
    out.write(f"echoed {params.word}\n")


def test_viewer_shows_the_answer_streaming_with_its_tool_calls_under_it(
    browser_context: Any, serve: Any, tmp_path: Path
) -> None:
    lanes = Lanes()
    server = serve(create_app(lanes=lanes))
    held: dict[str, Any] = {}

    async def first_half() -> None:
        bus = EventBus()
        bus.add_listener(lanes.handle)
        bus.publish(RunStart("r1", "agent"))
        writer = MessageWriter(bus=bus, run_id="r1", turn_id="turn-1", message_id="m1")
        await writer.__aenter__()
        writer.out.thinking("the user wants an echo")
        writer.out.text("I will echo ")
        writer.out.tool_call(0, id="c1", name="echo", arguments='{"wo')
        # The writer's paced publisher keeps running on the server's loop: the page
        # waits (bounded) until the batch reaches it.
        held.update(bus=bus, writer=writer)

    async def second_half() -> None:
        writer: MessageWriter = held["writer"]
        writer.out.text("the word 漢字.")
        writer.out.tool_call(0, arguments='rd": "hi"}')
        writer.out.end("tool_calls")
        await writer.__aexit__(None, None, None)
        loop = ToolLoop([echo], bus=held["bus"], run_id="r1", lane="agent")
        await loop.call("echo", {"word": "hi"}, "c1", turn_id="turn-1")

    page = browser_context.new_page()
    try:
        page.goto(server.viewer_url("lane=agent"))
        page.wait_for_function("() => window.toolfoldViewer")
        server.run(first_half())
        card = page.wait_for_selector("article.message.status-running[data-message-id='m1']")
        page.wait_for_function(
            "() => (document.querySelector(\"article[data-message-id='m1']\") || {}).innerText"
            ".includes('echo {\"wo')"
        )
        text = card.inner_text()
        assert "I will echo" in text and "writing" in text
        assert "the user wants an echo" in text
        page.screenshot(path=str(tmp_path / "message-streaming.png"))

        server.run(second_half())
        page.wait_for_selector("article.tool.status-ok[data-tool-call-id='c1']")
        page.wait_for_selector("article.message.status-ok[data-message-id='m1']")
        text = page.inner_text("article[data-message-id='m1']")
        assert "I will echo the word 漢字." in text and "tool_calls" in text
        assert 'echo {"word": "hi"}' in text
        # The call's card comes right after its message, marked as under it.
        order = json.loads(
            page.evaluate(
                "() => JSON.stringify(Array.from(document.getElementById('tools').children)"
                ".map((n) => [n.dataset.messageId || n.dataset.toolCallId, n.className]))"
            )
        )
        assert [o[0] for o in order] == ["m1", "c1"]
        assert "under-message" in order[1][1]
        assert "echoed hi" in page.inner_text("article[data-tool-call-id='c1']")
        page.screenshot(path=str(tmp_path / "message-settled.png"))
    finally:
        page.close()
        if "writer" in held and not held["writer"].out.ended:
            server.run(held["writer"].__aexit__(None, None, None))
