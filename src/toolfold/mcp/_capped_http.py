"""An HTTP transport for a Streamable HTTP upstream that never buffers past a cap.

The SDK's client reads a JSON response body whole however long it is, and bounds
a Server-Sent Event only at a fixed 1 MiB, failing the request as if the
connection had closed. Below the SDK's client, every upstream message goes
through the proxy's message cap (``_message_cap``), as over stdio: a JSON body or
an event is kept up to ``cap`` bytes; past it, the JSON body's connection is
dropped and the request gets the proxy's error instead, and an event is read to
its end without being kept and replaced by that error (or left out, when it
answered no request).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx2

from ._message_cap import Framer, Oversized, error_for, oversized, too_large

_SSE = "text/event-stream"
_JSON = "application/json"


def _content_type(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


def _request_id(request: httpx2.Request) -> int | str | None:
    try:
        body = json.loads(request.content)
    except (httpx2.RequestNotRead, ValueError):
        return None
    found = body.get("id") if isinstance(body, dict) and "method" in body else None
    return found if isinstance(found, int | str) else None


class _Lines:
    """SSE line ends (CRLF, CR or LF) as LF, so events end in one ``\\n\\n``."""

    def __init__(self) -> None:
        self._cr = False

    def __call__(self, chunk: bytes) -> bytes:
        if self._cr:
            chunk = b"\r" + chunk
        self._cr = chunk.endswith(b"\r")
        if self._cr:
            chunk = chunk[:-1]
        return chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _json_part(head: bytes) -> bytes:
    # An event's JSON-RPC message is its data line: `event: message\nid: 7\ndata: {...`.
    found = head.find(b"data:")
    return head[found + 5 :].lstrip(b" ") if found >= 0 else b""


class _CappedEvents(httpx2.AsyncByteStream):
    """An event stream passed on event by event, each at most ``cap`` bytes."""

    def __init__(self, inner: httpx2.AsyncByteStream, cap: int, who: str) -> None:
        self._inner = inner
        self._cap = cap
        self._who = who

    async def __aiter__(self) -> AsyncIterator[bytes]:
        framer = Framer(self._cap, b"\n\n")
        lines = _Lines()
        async for chunk in self._inner:
            for event in framer.feed(lines(chunk)):
                yield self._event(event)
        last = framer.leftover()
        if last is not None:
            yield self._event(last)

    def _event(self, event: bytearray | Oversized) -> bytes:
        if not isinstance(event, Oversized):
            event += b"\n\n"
            return bytes(event)
        dropped = oversized(_json_part(event.head), event.tail, event.size, self._cap, self._who)
        if isinstance(dropped, Exception):
            return b""  # no request waits for it (a notification, most likely)
        data = dropped.message.model_dump_json(by_alias=True, exclude_unset=True)
        return b"event: message\ndata: " + data.encode() + b"\n\n"

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """``inner`` with every upstream message bounded to ``cap`` bytes (see the module
    docstring); ``who`` names the upstream in the error."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, cap: int, who: str) -> None:
        self._inner = inner
        self._cap = cap
        self._who = who

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        # Bytes are counted as they come off the wire: compressed ones would hide
        # the size of what they expand to.
        request.headers["accept-encoding"] = "identity"
        response = await self._inner.handle_async_request(request)
        kind = _content_type(response)
        stream = response.stream
        if kind not in (_SSE, _JSON) or not isinstance(stream, httpx2.AsyncByteStream):
            return response
        if kind == _SSE:
            response.stream = _CappedEvents(stream, self._cap, self._who)
            return response
        body: list[bytes] = []
        size = 0
        async for chunk in stream:
            size += len(chunk)
            if size > self._cap:
                break
            body.append(chunk)
        else:
            await stream.aclose()
            response.stream = httpx2.ByteStream(b"".join(body))
            return response
        # Over the cap: hang up rather than read the rest (the id is in the request).
        body.clear()
        await stream.aclose()
        request_id = _request_id(request)
        if request_id is None:
            return httpx2.Response(202)  # nothing waits for a reply to a notification
        error = error_for(request_id, too_large(size, self._cap, self._who))
        headers = {"content-type": _JSON}
        return httpx2.Response(200, headers=headers, content=error.model_dump_json(by_alias=True))

    async def aclose(self) -> None:
        await self._inner.aclose()


__all__ = ["CappedTransport"]
