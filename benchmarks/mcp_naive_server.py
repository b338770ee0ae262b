"""The baseline for bench_mcp.py: a minimal MCP shell server as users write one today.

One ``bash`` tool that runs the command with ``subprocess.run`` and returns its whole
output as one text block; no window, no spill file, no progress, nothing recorded.
Built on the same SDK (low-level ``Server``, stdio) as ``toolfold mcp``, so the
comparison is about what the tool does, not which framework carries it.

``--sandbox``: each command runs in bubblewrap with the rules ``toolfold mcp`` uses by
default (``Sandbox("workspace-write")`` in the server's directory), still through
``subprocess.run``: what a plain server that confines its commands pays.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    }
    return types.ListToolsResult(
        tools=[types.Tool(name="bash", description="Run a shell command.", input_schema=schema)]
    )


SANDBOX = "--sandbox" in sys.argv[1:]


def argv(command: str) -> list[str]:
    inner = ["/bin/sh", "-c", command]
    if not SANDBOX:
        return inner
    from toolfold.execenv import Sandbox

    return Sandbox("workspace-write").argv(inner, cwd=os.getcwd())


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    command = str((params.arguments or {})["command"])
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(argv(command), capture_output=True, check=False)
    )
    text = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=done.returncode != 0
    )


async def main() -> None:
    server = Server("naive-shell", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
