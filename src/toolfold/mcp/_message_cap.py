"""The proxy's one rule for upstream messages over the cap, whatever the transport.

An upstream message (a stdio line, a Server-Sent Event, a JSON response body) is
kept as bytes up to ``cap``; past it the rest is read and dropped, never buffered,
and the request it answered gets a JSON-RPC error naming the cap, found from the
``"id"`` at the start or end of the message. ``Framer`` does the splitting and the
counting for a byte stream; ``oversized`` says what replaces a message over the cap.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import mcp_types as types
from mcp.shared.message import SessionMessage

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest upstream message the proxy reads (256 MiB)."""

_EDGE = 512
"""Bytes kept from each end of an oversized message, to find its ``"id"``."""

_ID_AT_START = re.compile(rb'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_ID_AT_END = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


_METHOD_AT_START = re.compile(rb'^\s*\{[^{}\[\]]*?"method"\s*:')


def _request_id(head: bytes, tail: bytes) -> int | str | None:
    # A response's "id" is a top-level member: writers put it first (Python's SDK) or
    # last (JavaScript's JSON.stringify of {result, jsonrpc, id}). A message with a
    # "method" is the upstream's own request (its "id" is the upstream's, not one of
    # ours) or a notification: it answers nothing.
    if _METHOD_AT_START.search(head):
        return None
    return _id_value(_ID_AT_START.search(head) or _ID_AT_END.search(tail))


def leading_id(head: bytes) -> int | str | None:
    """The ``"id"`` of a message whose first bytes are ``head``, when it is a top-level
    member before any nested value (as the SDKs write a request); else None."""
    return _id_value(_ID_AT_START.search(head))


def _id_value(found: re.Match[bytes] | None) -> int | str | None:
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))  # a JSON number or string literal, escapes and all
    except ValueError:  # an escape JSON does not have
        return None
    return value if isinstance(value, int | str) else None


def too_large(size: int, cap: int, who: str) -> str:
    """The one-line error a message over the cap becomes."""
    return (
        f"the {who} sent a message of more than {cap:,} bytes ({size:,} read), over the "
        "proxy's --max-message-bytes cap; it was dropped without being buffered"
    )


def error_for(request_id: int | str, message: str) -> types.JSONRPCError:
    """The JSON-RPC error answering ``request_id`` in place of a dropped response."""
    error = types.ErrorData(code=types.INTERNAL_ERROR, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)


class Unmatched(ValueError):
    """A message dropped (over the cap, or unreadable) whose request could not be told
    from its bytes. ``reply`` is true unless it was the upstream's own request or a
    notification: then it may have answered one of ours (see ``rejected``)."""

    def __init__(self, message: str, *, reply: bool) -> None:
        super().__init__(message)
        self.reply = reply


def rejected(head: bytes, tail: bytes, message: str) -> SessionMessage | Unmatched:
    """What the session receives instead of a dropped message whose first and last
    bytes are ``head`` and ``tail``: the error ``message`` for the request it answered,
    or (no ``"id"`` found) an ``Unmatched`` the transport decides about."""
    request_id = _request_id(head, tail)
    if request_id is None:
        return Unmatched(message, reply=not _METHOD_AT_START.search(head))
    return SessionMessage(error_for(request_id, message))


def oversized(
    head: bytes, tail: bytes, size: int, cap: int, who: str
) -> SessionMessage | Unmatched:
    """What the session receives instead of a message over ``cap`` (see ``rejected``)."""
    return rejected(head, tail, too_large(size, cap, who))


@dataclass(frozen=True)
class Oversized:
    """A message over the cap, dropped: its first and last bytes, and its size."""

    head: bytes
    tail: bytes
    size: int


class Framer:
    """Splits a byte stream into messages ending in ``sep``, holding at most ``cap``
    bytes of any one: a longer message is read to its end and dropped, and comes
    out as ``Oversized``. Memory stays at most ``cap`` plus the chunk being fed."""

    def __init__(self, cap: int, sep: bytes = b"\n") -> None:
        self.cap = cap
        self.sep = sep
        self._message = bytearray()
        self._rest = b""  # the last len(sep) - 1 bytes: maybe the start of a separator
        self._dropped = 0  # > 0 while skipping the rest of an oversized message
        self._head = self._tail = b""

    def feed(self, chunk: bytes) -> list[bytearray | Oversized]:
        """The messages ``chunk`` completes, in order (separators removed)."""
        data = self._rest + chunk if self._rest else chunk
        done: list[bytearray | Oversized] = []
        start = 0
        while True:
            end = data.find(self.sep, start)
            if end < 0:
                keep = max(start, len(data) - len(self.sep) + 1)
                self._add(data[start:keep])
                self._rest = data[keep:]
                return done
            self._add(data[start:end])
            done.append(self._take())
            start = end + len(self.sep)

    def leftover(self) -> bytearray | Oversized | None:
        """At the end of the stream: the unterminated last message, if any."""
        self._add(self._rest)
        self._rest = b""
        if not self._dropped and not self._message:
            return None
        return self._take()

    def _add(self, piece: bytes) -> None:
        if self._dropped:
            self._dropped += len(piece)
            self._tail = (self._tail + piece[-_EDGE:])[-_EDGE:]
        elif len(self._message) + len(piece) > self.cap:
            self._head = (bytes(self._message[:_EDGE]) + piece[:_EDGE])[:_EDGE]
            self._tail = (bytes(self._message[-_EDGE:]) + piece[-_EDGE:])[-_EDGE:]
            self._dropped = len(self._message) + len(piece)
            self._message = bytearray()
        else:
            self._message += piece

    def _take(self) -> bytearray | Oversized:
        if self._dropped:
            taken: bytearray | Oversized = Oversized(self._head, self._tail, self._dropped)
            self._dropped = 0
            self._head = self._tail = b""
        else:
            # The buffer itself, not a copy: a message near the cap is held once.
            taken = self._message
            self._message = bytearray()
        return taken


__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "Framer",
    "Oversized",
    "Unmatched",
    "error_for",
    "oversized",
    "rejected",
    "too_large",
]
