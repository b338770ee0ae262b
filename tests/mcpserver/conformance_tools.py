"""The fixture tools the MCP conformance suite calls, as toolfold tools (served with
``toolfold mcp --http --tools conformance_tools:TOOLS``), so the suite exercises
toolfold's own window, progress, error and task machinery, not a stand-in.

Each does what its scenario asks, through the tool's output sink only: a tool that
reports a problem raises (the harness turns it into an ``isError`` result; a
``ProtocolError`` fails the request instead: a JSON-RPC error, a ``failed`` task), progress
comes from the output growing (toolfold's paced progress notifications), an image is
an image block.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel

from toolfold.harness import tool
from toolfold.mcp import ProtocolError, ask_client

RED_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
"""A 1x1 red PNG."""


class NoParams(BaseModel):
    pass


class GreetParams(BaseModel):
    name: str


class DeleteParams(BaseModel):
    filename: str = "file.txt"


def _elicit(message: str, field: str) -> dict[str, Any]:
    schema = {"type": "object", "properties": {field: {"type": "boolean"}}, "required": [field]}
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": schema},
    }


class ComputeParams(BaseModel):
    seconds: float = 1.0
    label: str = ""


@tool(params=NoParams)
async def test_simple_text(
    tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Return a fixed line of text."""
    out.write("This is a simple text response for testing.")


@tool(params=NoParams)
async def test_error_handling(
    tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Always fail."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@tool(params=NoParams)
async def test_tool_with_progress(
    tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Print three steps, a little apart (each becomes a progress notification)."""
    for step in (0, 50, 100):
        out.write(f"step {step}/100\n")
        await asyncio.sleep(0.15)  # the tool's own pace: progress is paced at 100 ms


@tool(params=NoParams)
async def test_image_content(
    tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Return a 1x1 red PNG."""
    out.image({"type": "image", "data": RED_PIXEL, "mime_type": "image/png"})


@tool(params=GreetParams)
async def greet(tool_call_id: str, params: GreetParams, cancel: Any, out: Any, ctx: Any) -> None:
    """Say hello."""
    out.write(f"Hello, {params.name}!")


@tool(params=ComputeParams, replay_safe=True)
async def slow_compute(
    tool_call_id: str, params: ComputeParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Work for `seconds`, printing a line per tenth of a second; safe to run again."""
    ticks = max(1, round(params.seconds * 10))
    for i in range(ticks):
        if cancel.is_set():
            return
        out.write(f"{params.label} tick {i + 1}/{ticks}\n")
        await asyncio.sleep(0.1)
    out.write(f"{params.label} done\n")


@tool(params=NoParams)
async def failing_job(tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any) -> None:
    """Start, then report a problem."""
    out.write("starting the job\n")
    raise RuntimeError("the job failed")


@tool(params=NoParams)
async def protocol_error_job(
    tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Start, then fail the request itself (a JSON-RPC error, not a tool error)."""
    out.write("starting the job\n")
    raise ProtocolError(-32603, "the job's backend is gone")


@tool(params=NoParams)
async def test_reconnection(
    tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Take a moment, then answer (the suite reconnects meanwhile)."""
    await asyncio.sleep(0.3)
    out.write("Reconnection test completed successfully")


@tool(params=DeleteParams)
async def confirm_delete(
    tool_call_id: str, params: DeleteParams, cancel: Any, out: Any, ctx: Any
) -> None:
    """Ask the user to confirm, then say what was decided (nothing is deleted)."""
    answers = await ask_client({"confirm": _elicit(f"Delete {params.filename}?", "confirm")})
    answer = answers["confirm"]
    accepted = isinstance(answer, dict) and answer.get("action") == "accept"
    confirmed = accepted and bool((answer.get("content") or {}).get("confirm"))
    out.write(f"{params.filename}: {'deleted' if confirmed else 'kept'}\n")


@tool(params=NoParams)
async def multi_input(tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any) -> None:
    """Ask two questions at once, then report both answers."""
    answers = await ask_client(
        {
            "first": _elicit("First question?", "confirm"),
            "second": _elicit("Second question?", "confirm"),
        }
    )
    out.write(f"answered: {sorted(answers)}\n")


TOOLS = [
    test_simple_text,
    test_error_handling,
    test_tool_with_progress,
    test_image_content,
    greet,
    slow_compute,
    failing_job,
    protocol_error_job,
    test_reconnection,
    confirm_delete,
    multi_input,
]
