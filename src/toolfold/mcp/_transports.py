"""Serving an ``McpHost`` over stdio or Streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

from toolfold.server import Guard, GuardConfig, allowed_hosts, http_protocol

from ._errors import McpHostError
from ._events import RETRY_MS, EventLog, ResumableSessionManager
from ._host import McpHost
from ._stdio import MAX_LINE_BYTES, loop_stdio, protocol_error

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MCP_PATH = "/mcp"
"""Where the Streamable HTTP endpoint answers."""


async def serve_stdio(host: McpHost, *, max_line: int = MAX_LINE_BYTES) -> None:
    """Serve MCP on this process's stdin/stdout until the client closes stdin; calls
    still running then are cancelled and settle (cancelled) before this returns.

    The transport is the event loop's own (``_stdio``): a line that is not a JSON-RPC
    message is answered with a JSON-RPC error, a line over ``max_line`` bytes is
    dropped without being held, and stdout has backpressure."""
    server = host.server()
    # What start-up made (modules, the SDK's and pydantic's schemas, the host) lives as
    # long as the process: moved out of the cyclic collector's generations, so its
    # collections, which a call's allocations trigger, no longer walk all of it again.
    gc.freeze()
    try:
        async with loop_stdio(max_line) as (read_stream, write_stream):
            await server.run(read_stream, write_stream, host.initialization_options(server))
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
        interface="asgi3",  # said, not guessed by inspecting the app
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
    "MAX_LINE_BYTES",
    "MCP_PATH",
    "http_app",
    "protocol_error",
    "serve_http",
    "serve_stdio",
]
