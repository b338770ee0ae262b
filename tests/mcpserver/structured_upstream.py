"""A small MCP server for the proxy tests: a result whose structuredContent is bigger
than any window (the reference servers have none that large)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from sdk_upstream import serve_stdio

ROWS = [{"row": i, "label": f"row number {i}"} for i in range(5000)]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {}}
    return types.ListToolsResult(tools=[types.Tool(name="table", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text="5000 rows")],
        structured_content={"rows": ROWS},
        _meta={"upstream": "kept"},
    )


if __name__ == "__main__":
    serve_stdio("structured", list_tools, call_tool)
