"""A small MCP server (stdio) for the proxy tests, written with the official SDK: its
``change`` tool sends the three list-change notifications and an update of the
resource its ``uri`` argument names. The reference servers send tools and prompts
list changes only at moments a test cannot pick."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="change", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    await ctx.session.send_tool_list_changed()
    await ctx.session.send_resource_list_changed()
    await ctx.session.send_prompt_list_changed()
    await ctx.session.send_resource_updated((params.arguments or {})["uri"])
    return types.CallToolResult(content=[types.TextContent(type="text", text="changed")])


async def main() -> None:
    server = Server("notifying", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
