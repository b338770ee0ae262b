"""A small MCP server for the proxy's task test: its one tool, ``wait``, answers once
the file named by its ``gate`` argument exists (it has no tasks of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from sdk_upstream import serve_stdio


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"gate": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="wait", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    gate = Path(str((params.arguments or {})["gate"]))
    while not gate.exists():
        await anyio.sleep(0.02)
    return types.CallToolResult(content=[types.TextContent(type="text", text="through the gate")])


if __name__ == "__main__":
    serve_stdio("gated", list_tools, call_tool)
