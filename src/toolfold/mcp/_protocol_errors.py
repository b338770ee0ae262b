"""A tool that fails the request itself, not just its own work: ``ProtocolError``.

MCP tells two failures apart. A tool that ran and reported a problem answers with an
``isError`` result (its task ``completed``): that is every exception a toolfold tool
raises. A failure of the request (the SEP-2663 tasks extension reserves a ``failed``
task for it) is a JSON-RPC error: a tool says so by raising ``ProtocolError``.

The harness knows nothing of MCP, so the error rides the call's own ``details`` (under
``PROTOCOL_ERROR_KEY``) into the store with the call's settlement: a server restarted
after a crash reads it back with the call and answers ``tasks/get`` the same way.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from mcp.shared.exceptions import MCPError

from toolfold.harness import Tool, ToolResult

PROTOCOL_ERROR_KEY = "mcp_protocol_error"
"""The ``details`` key of a call that ended with a ``ProtocolError``."""

MAX_MESSAGE_CHARS = 4000
"""A protocol error's message is cut to this many characters."""

MAX_DATA_CHARS = 4096
"""A protocol error's ``data`` is kept only while its JSON is this short..."""

MAX_DATA_DEPTH = 8
"""... and nested no deeper than this (it is stored inside the call's details)."""


class ProtocolError(MCPError):
    """Raise from a tool served by ``toolfold mcp`` to fail the request with the JSON-RPC
    error ``(code, message, data)``: a ``tools/call`` without a task answers with that
    error, and a task ends ``failed`` with it. Any other exception is the tool's own
    failure: an ``isError`` result (a task ``completed``)."""


def _depth(value: Any, limit: int) -> int:
    if limit < 0 or not isinstance(value, (dict, list)):
        return 0
    inner = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in inner), default=0)


def error_object(exc: MCPError) -> dict[str, Any]:
    """The bounded JSON-RPC error object of ``exc`` (``data`` dropped when too big)."""
    message = str(exc.message)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[: MAX_MESSAGE_CHARS - 20] + " [error text cut]"
    error: dict[str, Any] = {"code": int(exc.code), "message": message}
    if exc.data is not None:
        try:
            text = json.dumps(exc.data)
        except (TypeError, ValueError, RecursionError):
            text = None
        if text is not None and len(text) <= MAX_DATA_CHARS:
            data = json.loads(text)
            if _depth(data, MAX_DATA_DEPTH) <= MAX_DATA_DEPTH:
                error["data"] = data
    return error


def answering_protocol_errors(tool: Tool[Any]) -> Tool[Any]:
    """``tool``, recording a ``ProtocolError`` it raises in the call's details (then
    raising it on, so the harness settles the call as an error as it would anyway)."""
    execute = tool.execute

    async def run(tool_call_id: str, params: Any, cancel: Any, out: Any, ctx: Any) -> Any:
        try:
            return await execute(tool_call_id, params, cancel, out, ctx)
        except ProtocolError as exc:
            out.details[PROTOCOL_ERROR_KEY] = error_object(exc)
            raise

    return dataclasses.replace(tool, execute=run)


def protocol_error(result: ToolResult) -> dict[str, Any] | None:
    """The JSON-RPC error a settled call ended with, or ``None`` (its result stands)."""
    if result.outcome != "error":
        return None
    error = result.details.get(PROTOCOL_ERROR_KEY)
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    if not isinstance(code, int) or isinstance(code, bool) or not isinstance(message, str):
        return None
    return {k: error[k] for k in ("code", "message", "data") if k in error}


__all__ = [
    "PROTOCOL_ERROR_KEY",
    "ProtocolError",
    "answering_protocol_errors",
    "error_object",
    "protocol_error",
]
