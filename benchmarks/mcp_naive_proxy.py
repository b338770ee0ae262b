"""The floor for bench_mcp_proxy.py: the smallest MCP proxy on the same SDK.

    python mcp_naive_proxy.py UPSTREAM_COMMAND [ARGS...]

It lists the upstream's tools and forwards every ``tools/call`` to it unchanged, over
the SDK's own stdio client and server: no window, no spill file, no record. What it
adds to a call is the extra stdio hop every proxy built on the SDK pays (the message
parsed, validated and serialised once more each way), so ``toolfold mcp proxy`` minus
this is what toolfold's own work costs.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def main(command: list[str]) -> None:
    params = StdioServerParameters(command=command[0], args=command[1:])
    async with stdio_client(params) as (r, w), ClientSession(r, w) as upstream:
        await upstream.initialize()

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return await upstream.list_tools()

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await upstream.call_tool(params.name, dict(params.arguments or {}))

        server = Server("naive-proxy", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
