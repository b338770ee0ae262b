"""The baseline for bench_mcp.py: a minimal MCP shell server as users write one today.

One ``bash`` tool that runs the command with ``subprocess.run`` and returns its whole
output as one text block; no window, no spill file, no progress, nothing recorded. The
command runs in the shell ``toolfold mcp``'s ``bash`` tool runs (``bash`` from ``PATH``):
a tool the model is told is ``bash`` gets bash syntax, and ``/bin/sh`` (dash on Debian)
starts sooner, which would measure the shells, not the servers; ``--shell /bin/sh``
runs that one instead (``bench_mcp.py --unconfined`` shows both).
Built on the same SDK (low-level ``Server``, stdio) as ``toolfold mcp``, so the
comparison is about what the tool does, not which framework carries it.

``--durable PATH``: the least a durable server must do, as an async server would do it:
a start row committed before the command runs and a result row committed before the
answer, to the SQLite file ``PATH`` in WAL mode with ``synchronous = FULL`` (every
commit flushed), each commit on a worker thread (``anyio.to_thread.run_sync``). No lease,
no output window, no resume: what "a plain server with the same durability" costs.

``--sandbox``: each command runs in bubblewrap with the rules ``toolfold mcp`` uses by
default (``Sandbox("workspace-write")`` in the server's directory), still through
``subprocess.run``: what a plain server that confines its commands pays.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from naive_journal import Journal


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    }
    return types.ListToolsResult(
        tools=[types.Tool(name="bash", description="Run a shell command.", input_schema=schema)]
    )


SANDBOX = "--sandbox" in sys.argv[1:]
DURABLE = sys.argv[sys.argv.index("--durable") + 1] if "--durable" in sys.argv[1:] else None


JOURNAL = Journal(DURABLE) if DURABLE is not None else None


SHELL = (
    sys.argv[sys.argv.index("--shell") + 1]
    if "--shell" in sys.argv[1:]
    else shutil.which("bash") or "/bin/sh"
)


def argv(command: str) -> list[str]:
    inner = [SHELL, "-c", command]
    if not SANDBOX:
        return inner
    from toolfold.execenv import Sandbox

    return Sandbox("workspace-write").argv(inner, cwd=os.getcwd())


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    command = str((params.arguments or {})["command"])
    journal = JOURNAL
    call = 0 if journal is None else await anyio.to_thread.run_sync(journal.start, command)
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(argv(command), capture_output=True, check=False)
    )
    text = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    if journal is not None:
        result = json.dumps({"output": text, "returncode": done.returncode})
        await anyio.to_thread.run_sync(journal.settle, call, result)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], is_error=done.returncode != 0
    )


async def main() -> None:
    server = Server("naive-shell", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
