"""A loopback HTTP forwarder that adds ``Authorization: Bearer $TOKEN`` to every request.

The MCP conformance suite sends no credentials, and ``toolfold mcp --http`` refuses
requests without its token. This sits between them (tests only): every request is
passed on unchanged (method, path, query, headers, Host and Origin included, body
read whole), with the bearer token added, and the answer streamed back (SSE too).

    python auth_forwarder.py LISTEN_PORT UPSTREAM_PORT   (token in $TOOLFOLD_TOKEN)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import httpx
import uvicorn

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def lifespan(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer a non-HTTP scope (only ``lifespan`` comes here)."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})


async def request_body(receive: Receive) -> bytes | None:
    """The whole request body (JSON-RPC messages are small here); None if the client left."""
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def upstream_request(
    client: httpx.AsyncClient, scope: Scope, body: bytes, port: int, token: str
) -> httpx.Request:
    """The request to pass on: the same one, with the bearer token."""
    headers = [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in scope["headers"]
        if k.lower() not in (b"authorization", b"content-length", b"transfer-encoding")
    ]
    headers.append(("authorization", f"Bearer {token}"))
    query = scope.get("query_string", b"").decode("latin-1")
    url = f"http://127.0.0.1:{port}{scope['path']}" + (f"?{query}" if query else "")
    return client.build_request(scope["method"], url, headers=headers, content=body)


async def start_response(send: Send, response: httpx.Response) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-length", "transfer-encoding")
            ],
        }
    )


async def stream_response(send: Send, response: httpx.Response) -> None:
    """Relay the answer as it comes (an SSE stream too)."""
    try:
        await start_response(send, response)
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await response.aclose()


def forwarder(upstream_port: int, token: str) -> Callable[..., Awaitable[None]]:
    client = httpx.AsyncClient(timeout=None)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await lifespan(scope, receive, send)
            return
        body = await request_body(receive)
        if body is None:
            return
        request = upstream_request(client, scope, body, upstream_port, token)
        await stream_response(send, await client.send(request, stream=True))

    return app


if __name__ == "__main__":
    listen, upstream = int(sys.argv[1]), int(sys.argv[2])
    app = forwarder(upstream, os.environ["TOOLFOLD_TOKEN"])
    uvicorn.run(app, host="127.0.0.1", port=listen, log_level="warning", lifespan="off")
