"""What the small upstream servers of the proxy tests share: each is a script with a
``list_tools`` and a ``call_tool`` handler, served over stdio by the official SDK's
low-level ``Server``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def serve_stdio(
    name: str,
    list_tools: Callable[[Any, Any], Awaitable[types.ListToolsResult]],
    call_tool: Callable[[Any, types.CallToolRequestParams], Awaitable[types.CallToolResult]],
) -> None:
    """Serve the two handlers over stdin/stdout until stdin closes."""

    async def main() -> None:
        server = Server(name, on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)
