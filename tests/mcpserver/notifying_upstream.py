"""A small MCP server (stdio) for the proxy tests, written with the official SDK: its
``change`` tool sends the three list-change notifications and an update of the
resource its ``uri`` argument names. The reference servers send tools and prompts
list changes only at moments a test cannot pick."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from sdk_upstream import serve_stdio


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="change", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    await ctx.session.send_tool_list_changed()
    await ctx.session.send_resource_list_changed()
    await ctx.session.send_prompt_list_changed()
    await ctx.session.send_resource_updated((params.arguments or {})["uri"])
    return types.CallToolResult(content=[types.TextContent(type="text", text="changed")])


if __name__ == "__main__":
    serve_stdio("notifying", list_tools, call_tool)
