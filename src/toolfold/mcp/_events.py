"""Resumable Streamable HTTP: the events a client missed, replayed on reconnect.

A client whose event stream breaks mid-call reconnects with a GET carrying
``Last-Event-ID``; the SDK's transport asks its ``EventStore`` for what followed.
Without a store the SDK answers that GET with an HTTP 500, so ``toolfold mcp --http``
always has one: :class:`EventLog`, kept in this process's memory.

Why memory and not toolfold's session store: an HTTP session of the SDK lives in the
memory of the process that opened it (a request naming it at another replica gets
404), so a replay can only ever be served by that process; storing the events
durably would buy nothing but a write per message. The tasks of a call are what
survive a restart (``tasks/get``), not the transport's event stream.

Bounds: one log per server holds at most ``max_events`` events and ``max_bytes`` of
their JSON, the oldest dropped first, whatever the number of sessions. Each session
sees only its own events: the SDK names streams by request id (``0``, ``1``, ...,
the same in every session), so every session gets a view that tags what it stores,
and an event id from another session replays nothing.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from typing import Any

from mcp.server.streamable_http import EventCallback, EventMessage, EventStore
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types import JSONRPCMessage

MAX_EVENTS = 50_000
"""Events the log keeps over all sessions, before the oldest go."""

MAX_BYTES = 64 * 1024 * 1024
"""JSON bytes the log keeps over all sessions, before the oldest events go."""

RETRY_MS = 1000
"""The SSE ``retry`` the priming event of each stream suggests: how long a client
waits before reconnecting to a stream the server closed."""


@dataclass(frozen=True)
class _Event:
    seq: int
    session: int
    stream_id: str
    message: JSONRPCMessage | None
    size: int


class EventLog:
    """The bounded event log of one server; :meth:`view` gives a session its store."""

    def __init__(self, *, max_events: int = MAX_EVENTS, max_bytes: int = MAX_BYTES) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: deque[_Event] = deque()
        self._bytes = 0
        self._seq = itertools.count(1)
        self._sessions = itertools.count(1)

    def view(self) -> SessionEvents:
        """A new session's event store."""
        return SessionEvents(self, next(self._sessions))

    @property
    def size(self) -> tuple[int, int]:
        """(events, bytes) held."""
        return len(self._events), self._bytes

    def append(self, session: int, stream_id: str, message: JSONRPCMessage | None) -> int:
        size = 0 if message is None else len(message.model_dump_json(by_alias=True))
        event = _Event(next(self._seq), session, stream_id, message, size)
        self._events.append(event)
        self._bytes += size
        while self._events and (
            len(self._events) > self.max_events or self._bytes > self.max_bytes
        ):
            self._bytes -= self._events.popleft().size
        return event.seq

    def after(self, session: int, seq: int) -> tuple[str, list[_Event]] | None:
        """The stream of event ``seq`` of ``session`` and its events after it, or
        ``None`` when the log does not hold that event (never stored, dropped for
        room, or another session's)."""
        events = list(self._events)
        start = next(
            (i for i, e in enumerate(events) if e.seq == seq and e.session == session), None
        )
        if start is None:
            return None
        stream = events[start].stream_id
        return stream, [
            e for e in events[start + 1 :] if e.session == session and e.stream_id == stream
        ]


class SessionEvents(EventStore):
    """One HTTP session's events, kept in the server's :class:`EventLog`."""

    def __init__(self, log: EventLog, session: int) -> None:
        self._log = log
        self._session = session

    async def store_event(self, stream_id: str, message: JSONRPCMessage | None) -> str:
        return str(self._log.append(self._session, str(stream_id), message))

    async def replay_events_after(
        self, last_event_id: str, send_callback: EventCallback
    ) -> str | None:
        try:
            seq = int(last_event_id)
        except ValueError:
            return None
        found = self._log.after(self._session, seq)
        if found is None:
            return None
        stream, events = found
        for event in events:
            if event.message is not None:
                await send_callback(EventMessage(event.message, str(event.seq)))
        return stream


class ResumableSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, giving each new session its own view of one
    :class:`EventLog` (the SDK hands every session the same store, whose stream ids
    would then collide across sessions)."""

    def __init__(self, *args: Any, log: EventLog, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log = log

    def _admit_session(self, requestor: Any) -> Any:
        transport = super()._admit_session(requestor)
        if transport is not None:
            transport._event_store = self.log.view()
        return transport


__all__ = [
    "MAX_BYTES",
    "MAX_EVENTS",
    "RETRY_MS",
    "EventLog",
    "ResumableSessionManager",
    "SessionEvents",
]
