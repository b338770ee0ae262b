"""toolfold.mcp — toolfold's tools as a Model Context Protocol server (``toolfold mcp``).

An integration on top of the harness: the built-in tools (and a user's own) over
stdio or Streamable HTTP through the official ``mcp`` SDK, with bounded results, a
``read`` hint for the spill file, paced progress notifications, cancellation that
keeps partial output, and every call recorded durably in a session store. Nothing
else in toolfold imports it; it needs the ``mcp`` extra.
"""

from __future__ import annotations

from ._errors import McpHostError, ToolSpecError
from ._host import INSTRUCTIONS, McpHost, McpSettings
from ._input import InputUnavailable, ask_client
from ._progress import ForwardedProgress, McpHooks, ProgressReporter, status_line
from ._protocol_errors import ProtocolError
from ._proxy import READER, ProxyHost, UpstreamArgs, proxy_note
from ._results import call_tool_result, read_hint
from ._tasks import TASKS_EXTENSION, TaskSettings
from ._tools import OUTPUT_SCHEMA, describe, input_schema, load_tools, server_tools, window_note
from ._transports import (
    MCP_PATH,
    http_app,
    serve_http,
    serve_stdio,
)
from ._upstream import Upstream, UpstreamError, UpstreamSpec

__all__ = [
    "INSTRUCTIONS",
    "MCP_PATH",
    "OUTPUT_SCHEMA",
    "READER",
    "TASKS_EXTENSION",
    "ForwardedProgress",
    "InputUnavailable",
    "McpHooks",
    "McpHost",
    "McpHostError",
    "McpSettings",
    "ProgressReporter",
    "ProtocolError",
    "ProxyHost",
    "TaskSettings",
    "ToolSpecError",
    "Upstream",
    "UpstreamArgs",
    "UpstreamError",
    "UpstreamSpec",
    "ask_client",
    "call_tool_result",
    "describe",
    "http_app",
    "input_schema",
    "load_tools",
    "proxy_note",
    "read_hint",
    "serve_http",
    "serve_stdio",
    "server_tools",
    "status_line",
    "window_note",
]
