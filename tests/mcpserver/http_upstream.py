"""A small Streamable HTTP MCP server for the proxy tests, written with the official SDK:
``python http_upstream.py json|sse`` listens on 127.0.0.1:$PORT and answers each
request with one JSON body (``json``) or an event stream (``sse``, whose lines the
SDK ends with CRLF). Its ``blob`` tool returns ``size`` bytes of text: the
reference servers have no tool whose result size the caller picks over HTTP with
JSON bodies."""

from __future__ import annotations

import os
import sys
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.lowlevel import Server


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"size": {"type": "integer"}}}
    return types.ListToolsResult(tools=[types.Tool(name="blob", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    size = int((params.arguments or {})["size"])
    return types.CallToolResult(content=[types.TextContent(type="text", text="z" * size)])


def main() -> None:
    server = Server("http-upstream", on_list_tools=list_tools, on_call_tool=call_tool)
    app = server.streamable_http_app(json_response=sys.argv[1] == "json")
    uvicorn.run(app, host="127.0.0.1", port=int(os.environ["PORT"]), log_level="warning")


if __name__ == "__main__":
    main()
