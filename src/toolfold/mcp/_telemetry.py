"""MCP request metrics (docs/observability.md).

The MCP SDK traces every request itself: a SERVER span per inbound request, continuing
the trace context the client put in ``params._meta`` (``traceparent``, ``tracestate``),
and a CLIENT span per outbound request, whose context it injects into that request's
``_meta``. toolfold's ``execute_tool`` span runs inside the first, and the proxy's
request to its upstream inside that. What the SDK does not record is the transport
(and the session id over HTTP) on its request span, and the convention's duration
metrics: ``mcp.server.operation.duration`` for every request a toolfold server answers,
``mcp.client.operation.duration`` for every tool call the proxy forwards. Each costs a
look-up when no provider is configured (``toolfold._otel``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from toolfold import _otel

T = TypeVar("T")


def _error_type(exc: BaseException) -> str:
    # The JSON-RPC error code when there is one, as the convention asks.
    return str(exc.error.code) if isinstance(exc, MCPError) else type(exc).__qualname__


class RequestTelemetry:
    """Server middleware (inside the SDK's tracing middleware): adds the transport and,
    over HTTP, the MCP session id to the SDK's request span, and records
    ``mcp.server.operation.duration``."""

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        span, meters = _otel.recording_span(), _otel.meters()
        if span is None and meters is None:
            return await call_next(ctx)
        # stdio has no HTTP request; the convention names it a pipe.
        transport = "pipe" if ctx.request is None else "tcp"
        if span is not None:
            found: dict[str, _otel.AttrValue] = {"network.transport": transport}
            headers = getattr(ctx.request, "headers", None)
            session_id = headers.get("mcp-session-id") if headers is not None else None
            if isinstance(session_id, str) and session_id:
                found["mcp.session.id"] = session_id
            span.set_attributes(found)
        if meters is None:
            return await call_next(ctx)
        attributes: dict[str, _otel.AttrValue] = {
            "mcp.method.name": ctx.method,
            "mcp.protocol.version": ctx.protocol_version,
            "network.transport": transport,
        }
        name = ctx.params.get("name") if ctx.params else None
        if ctx.method == "tools/call" and isinstance(name, str):
            attributes["gen_ai.tool.name"] = name
        started = time.monotonic()
        try:
            result = await call_next(ctx)
        except BaseException as exc:
            attributes["error.type"] = _error_type(exc)
            meters.mcp_server_duration.record(time.monotonic() - started, attributes)
            raise
        if isinstance(result, types.CallToolResult) and result.is_error:
            attributes["error.type"] = "tool_error"
        meters.mcp_server_duration.record(time.monotonic() - started, attributes)
        return result


async def timed_tool_call(tool_name: str, call: Callable[[], Awaitable[T]]) -> T:
    """Await ``call()`` (a ``tools/call`` toward an upstream), recording
    ``mcp.client.operation.duration``."""
    meters = _otel.meters()
    if meters is None:
        return await call()
    attributes: dict[str, _otel.AttrValue] = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": tool_name,
    }
    started = time.monotonic()
    try:
        result = await call()
    except BaseException as exc:
        attributes["error.type"] = _error_type(exc)
        meters.mcp_client_duration.record(time.monotonic() - started, attributes)
        raise
    if isinstance(result, types.CallToolResult) and result.is_error:
        attributes["error.type"] = "tool_error"
    meters.mcp_client_duration.record(time.monotonic() - started, attributes)
    return result
