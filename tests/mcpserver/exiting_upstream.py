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
from sdk_upstream import serve_stdio


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


if __name__ == "__main__":
    with open(os.environ["UPSTREAM_PIDS"], "a") as pids:
        print(os.getpid(), file=pids)
    serve_stdio("exiting", list_tools, call_tool)
