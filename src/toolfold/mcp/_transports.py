"""Serving an ``McpHost`` over stdio or Streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.routing import Route

from toolfold.server import Guard, GuardConfig, allowed_hosts, http_protocol

from ._errors import McpHostError
from ._events import RETRY_MS, EventLog, ResumableSessionManager
from ._host import McpHost

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MCP_PATH = "/mcp"
"""Where the Streamable HTTP endpoint answers."""


MAX_ERROR_DETAIL = 200
"""Characters of the decoder's complaint quoted back in a parse error."""


def protocol_error(exc: Exception) -> SessionMessage:
    """The JSON-RPC error answering a line that is not a JSON-RPC message: -32700 for
    text that is not JSON, -32600 for JSON that is not a valid message (``id`` is
    null: it could not be read)."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    not_json = any(e.get("type") == "json_invalid" for e in errors)
    code, what = (
        (types.PARSE_ERROR, "Parse error: the message is not valid JSON")
        if not_json or not errors
        else (types.INVALID_REQUEST, "Invalid Request: the JSON is not a JSON-RPC 2.0 message")
    )
    detail = " ".join(str(errors[0].get("msg", exc) if errors else exc).split())
    message = f"{what} ({detail[:MAX_ERROR_DETAIL]}); the server keeps serving"
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


async def serve_stdio(host: McpHost) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes stdin; calls
    still running then are cancelled and settle (cancelled) before this returns.

    The SDK's stdio transport hands a line it cannot decode to the server as an
    exception, which its loop only logs; the client would wait forever for an
    answer. Lines are relayed here instead, and a bad one is answered with a
    JSON-RPC error."""
    server = host.server()
    try:
        async with stdio_server() as (read_stream, write_stream):
            relay_in, relay_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)

            async def relay() -> None:
                async with relay_in:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            await write_stream.send(protocol_error(item))
                        else:
                            await relay_in.send(item)

            async with anyio.create_task_group() as group:
                group.start_soon(relay)
                await server.run(relay_out, write_stream, host.initialization_options(server))
                group.cancel_scope.cancel()
    finally:
        await host.aclose()


MAX_BODY_BYTES = 4 * 1024 * 1024
"""Largest request body over HTTP (the SDK's own default): tool arguments, not uploads."""


def http_app(host: McpHost, *, token: str, bind: str) -> ASGIApp:
    """The Streamable HTTP ASGI app at ``/mcp`` behind toolfold's server ``Guard``: a
    shell tool on an open port is remote code execution for anyone who reaches it, so
    every request needs the bearer token, a Host naming this server and no foreign
    Origin (the MCP spec requires Origin validation against DNS rebinding).

    Raises ``McpHostError`` for a token the guard cannot use."""
    app = resumable_app(host.server(), bind=bind)
    wildcard = bind in ("0.0.0.0", "::", "")
    try:
        config = GuardConfig(
            token=token,
            allowed_hosts=allowed_hosts(None if wildcard else bind),
            max_body_bytes=MAX_BODY_BYTES,
            token_hint="send it as 'Authorization: Bearer <token>' ($TOOLFOLD_TOKEN)",
        )
    except ValueError as exc:
        raise McpHostError(f"$TOOLFOLD_TOKEN cannot be used: {exc}") from exc
    return Guard(app, config)


def resumable_app(server: Server[Any], *, bind: str, log: EventLog | None = None) -> ASGIApp:
    """The SDK's Streamable HTTP app at ``/mcp`` for ``server``, with an event store
    per session (so a GET carrying ``Last-Event-ID`` replays what the client missed)
    and priming events that carry an id and a ``retry``. Built here rather than by
    ``Server.streamable_http_app``, which would give every session one store."""
    loopback = bind in ("127.0.0.1", "localhost", "::1")
    security = (
        TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
        if loopback
        else None
    )
    manager = ResumableSessionManager(
        app=server,
        log=log or EventLog(),
        retry_interval=RETRY_MS,
        security_settings=security,
    )
    return Starlette(
        routes=[Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager))],
        lifespan=lambda app: manager.run(),
    )


async def serve_http(host: McpHost, *, bind: str, port: int, token: str) -> None:
    """Serve Streamable HTTP on ``bind:port`` until SIGINT/SIGTERM."""
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - the mcp extra pulls it in
        raise McpHostError(
            "--http needs uvicorn; install it with: pip install 'toolfold[mcp]'"
        ) from exc
    app = http_app(host, token=token, bind=bind)
    config = uvicorn.Config(
        app,
        host=bind,
        port=port,
        log_level="warning",
        lifespan="on",
        http=http_protocol(),  # a deadline for request headers (docs/security.md)
    )
    server = uvicorn.Server(config)
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
    loop = asyncio.get_running_loop()

    def stop() -> None:
        server.should_exit = True

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop)
    try:
        sock = socket.create_server((bind, port), reuse_port=False)
    except OSError as exc:
        raise McpHostError(
            f"cannot listen on {bind}:{port}: {exc.strerror or exc}; pick another --port"
        ) from exc
    print(
        f"toolfold: MCP (Streamable HTTP) at http://{bind}:{port}{MCP_PATH}; "
        "send Authorization: Bearer <token>; Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)
        await host.aclose()


__all__ = [
    "MCP_PATH",
    "http_app",
    "serve_http",
    "serve_stdio",
]
