"""Serving an ``McpHost`` over stdio or Streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ._errors import McpHostError
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
                await server.run(relay_out, write_stream, server.create_initialization_options())
                group.cancel_scope.cancel()
    finally:
        await host.aclose()


def require_token(app: ASGIApp, token: str) -> ASGIApp:
    """Refuse every HTTP request without ``Authorization: Bearer <token>`` (401).

    The one wrap that turns the SDK's app into an authenticated one: a shell tool
    on an open port is remote code execution for anyone who can reach it, and a
    browser page cannot add this header to a cross-site request."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not secrets.compare_digest(given, expected):
                body = b"missing or wrong bearer token: send Authorization: Bearer <token>\n"
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await app(scope, receive, send)

    return guarded


def loopback_security(bind: str, port: int) -> TransportSecuritySettings:
    """Host and Origin allowlists for a server bound to ``bind:port``: the names a
    local client uses, on this port only (DNS rebinding protection; the MCP spec
    requires servers to validate Origin)."""
    names = (
        {bind, "127.0.0.1", "localhost", "[::1]"}
        if bind in ("127.0.0.1", "localhost", "::1")
        else {bind}
    )
    hosts = sorted(f"{n}:{port}" for n in names)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )


def http_app(host: McpHost, *, token: str, bind: str, port: int) -> ASGIApp:
    """The Streamable HTTP ASGI app at ``/mcp``: bearer token, Host and Origin checked."""
    server = host.server()
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=bind,
        transport_security=loopback_security(bind, port),
    )
    return require_token(app, token)


async def serve_http(host: McpHost, *, bind: str, port: int, token: str) -> None:
    """Serve Streamable HTTP on ``bind:port`` until SIGINT/SIGTERM."""
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - the mcp extra pulls it in
        raise McpHostError(
            "--http needs uvicorn; install it with: pip install 'toolfold[mcp]'"
        ) from exc
    app = http_app(host, token=token, bind=bind, port=port)
    config = uvicorn.Config(app, host=bind, port=port, log_level="warning", lifespan="on")
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
    "loopback_security",
    "require_token",
    "serve_http",
    "serve_stdio",
]
