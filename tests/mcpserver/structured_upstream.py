"""A small MCP server for the proxy tests: a result whose structuredContent is bigger
than any window (the reference servers have none that large)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

ROWS = [{"row": i, "label": f"row number {i}"} for i in range(5000)]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    return types.ListToolsResult(tools=[types.Tool(name="table", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="5000 rows")],
        structured_content={"rows": ROWS},
    )


async def main() -> None:
    server = Server("structured", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
