"""The HTTP protocol toolfold's servers run on uvicorn: uvicorn's h11 protocol plus a
deadline for a request's headers.

uvicorn has no header timeout: its keep-alive timer runs only between requests and is
cancelled by the first byte of the next one, so a connection that opens and sends
its headers a byte a minute (or never finishes them) is held forever, before any
check of the guard can run (the guard sees a request only once its headers are
complete). Each such connection costs a socket and a little memory; enough of them
exhaust the process's file descriptors (a "slowloris" attack).
"""

from __future__ import annotations

import asyncio
from typing import Any

HEADER_TIMEOUT = 10.0
"""Seconds a connection gets to complete a request's headers (from its opening, or
from the first byte of a later request on a kept-alive connection); then it is closed.
Bodies are not timed here: the guard bounds their size, and a request with complete
headers has passed the token check."""


def http_protocol(header_timeout: float = HEADER_TIMEOUT) -> type[asyncio.Protocol]:
    """The protocol class to give ``uvicorn.Config(http=...)``."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def _waiting_for_headers(self) -> bool:
            cycle = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _arm(self) -> None:
            if self._deadline is None:
                self._deadline = self.loop.call_later(header_timeout, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            transport = self.transport
            if transport.get_protocol() is not self:
                return  # upgraded to a WebSocket: no longer an HTTP request's to time
            if self._waiting_for_headers() and not transport.is_closing():
                transport.close()

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._waiting_for_headers():
                self._arm()  # a later request on a kept-alive connection: its own deadline
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadlineProtocol
