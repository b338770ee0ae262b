"""A small MCP server (stdio) for the proxy's ``subscriptions/listen`` test, written
with the official SDK on the 2026-07-28 wire: it serves ``subscriptions/listen`` (the
SDK's ``ListenHandler``), and its ``change`` tool publishes the three list changes and
an update of the resource its ``uri`` argument names. It says how many listen
streams it served in the tool's result."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)

BUS = InMemorySubscriptionBus()
HANDLER = ListenHandler(BUS)
LISTENS: list[list[str]] = []


async def listen(ctx: Any, params: types.SubscriptionsListenRequestParams) -> Any:
    LISTENS.append(sorted(params.notifications.resource_subscriptions or []))
    return await HANDLER(ctx, params)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
    return types.ListToolsResult(tools=[types.Tool(name="change", input_schema=schema)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    for event in (ToolsListChanged(), ResourcesListChanged(), PromptsListChanged()):
        await BUS.publish(event)
    await BUS.publish(ResourceUpdated(uri=str((params.arguments or {})["uri"])))
    text = f"changed; listens: {LISTENS}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[])


async def main() -> None:
    server = Server(
        "listening",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_subscriptions_listen=listen,
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
