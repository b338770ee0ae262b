"""The floor for bench_mcp_proxy.py: the smallest MCP proxy on the same SDK.

    python mcp_naive_proxy.py [--durable PATH] UPSTREAM_COMMAND [ARGS...]

It lists the upstream's tools and forwards every ``tools/call`` to it unchanged, over
the SDK's own stdio client and server: no window, no spill file, no record. What it
adds to a call is the extra stdio hop every proxy built on the SDK pays (the message
parsed, validated and serialised once more each way), so ``toolfold mcp proxy`` minus
this is what toolfold's own work costs.

``--durable PATH``: the least a durable proxy must do, as an async proxy would do it:
a start row committed before the call is forwarded and a result row committed before
the answer, to the SQLite file ``PATH`` in WAL mode with ``synchronous = FULL`` (every
commit flushed), each commit on a worker thread (``anyio.to_thread.run_sync``). No
lease, no window, no resume: what "a pass-through proxy with the same durability"
costs, the floor of ``toolfold mcp proxy`` on its default store.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from naive_journal import Journal


async def main(argv: list[str]) -> None:
    journal = None
    if argv[:1] == ["--durable"]:
        journal = Journal(argv[1])
        argv = argv[2:]
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    async with stdio_client(params) as (r, w), ClientSession(r, w) as upstream:
        await upstream.initialize()

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return await upstream.list_tools()

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            arguments = dict(params.arguments or {})
            if journal is None:
                return await upstream.call_tool(params.name, arguments)
            what = json.dumps({"tool": params.name, "arguments": arguments})
            call = await anyio.to_thread.run_sync(journal.start, what)
            result = await upstream.call_tool(params.name, arguments)
            record = result.model_dump_json(by_alias=True, exclude_none=True)
            await anyio.to_thread.run_sync(journal.settle, call, record)
            return result

        server = Server("naive-proxy", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
