"""A small MCP server (stdio) for the proxy tests that dies on request, written with the
official SDK: ``wait`` blocks until the process ends (after creating the file its
``started`` argument names), ``exit`` writes a line to stderr and exits with status
3, ``echo`` answers. It appends its pid to the file named by ``$UPSTREAM_PIDS``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    return types.ListToolsResult(
        tools=[types.Tool(name=name, input_schema=schema) for name in ("wait", "exit", "echo")]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "wait":
        Path(args["started"]).touch()
        await anyio.sleep_forever()
    if params.name == "exit":
        print("fatal: the disk is on fire", file=sys.stderr, flush=True)
        os._exit(3)
    return types.CallToolResult(content=[types.TextContent(type="text", text=str(args))])


async def main() -> None:
    with open(os.environ["UPSTREAM_PIDS"], "a") as pids:
        print(os.getpid(), file=pids)
    server = Server("exiting", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
