"""The event bus: ordered delivery of harness events to async subscribers and sync listeners."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

from ._errors import BusClosedError, SubscriberOverflowError
from .events import RunEnd, RunStart, ToolEnd, ToolStart

if TYPE_CHECKING:
    from .events import HarnessEvent

log = logging.getLogger("toolfold.harness")

DEFAULT_MAX_QUEUE = 10_000
"""Events a subscriber may fall behind by before it is dropped."""

Listener = Callable[["HarnessEvent"], None]
"""A sync listener: called with each event as it is published."""


class Subscription:
    """An async iterator over every event published after ``subscribe()``, in order.

    Each subscription has its own bounded queue, so a slow subscriber never blocks
    a tool (``publish`` never waits). Overflow policy: when the queue is full the
    subscription is **dropped** — it delivers what it had queued and then raises
    ``SubscriberOverflowError`` — rather than losing events silently. A dropped
    consumer resubscribes and starts from a fresh base (a lane snapshot).
    """

    def __init__(self, bus: EventBus, max_queue: int) -> None:
        self._bus = bus
        self._queue: deque[HarnessEvent] = deque()
        self._max_queue = max_queue
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        self._overflow: SubscriberOverflowError | None = None

    @property
    def dropped(self) -> bool:
        """True if this subscription overflowed and was detached from the bus."""
        return self._overflow is not None

    def __aiter__(self) -> AsyncIterator[HarnessEvent]:
        return self

    async def __anext__(self) -> HarnessEvent:
        while not self._queue:
            if self._overflow is not None:
                raise self._overflow
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._queue.popleft()

    def close(self) -> None:
        """Stop receiving; iteration ends once the queued events are consumed."""
        self._end()
        self._bus._detach(self)

    def _push(self, event: HarnessEvent) -> None:
        if self._ended:
            return
        if len(self._queue) >= self._max_queue:
            self._overflow = SubscriberOverflowError(
                f"event subscriber fell {len(self._queue)} events behind (max_queue="
                f"{self._max_queue}) and was dropped at a {event.type} event; "
                "resubscribe and refold from a base, or consume faster / raise max_queue"
            )
            self._bus._detach(self)
            self._end()
            return
        self._queue.append(event)
        self._wake()

    def _end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class EventBus:
    """Fan-out of ``HarnessEvent``s, in publication order, to every subscriber.

    - ``subscribe()``: an async iterator with its own bounded queue (see
      ``Subscription`` for the overflow policy).
    - ``add_listener(fn)``: a synchronous callback run inside ``publish`` (for
      in-process reducers such as a lane view). A listener that raises is detached
      and the error is logged and kept in ``listener_errors``; it never fails the tool
      that published.

    **Attaching mid-run.** Both start with what is running: the ``RunStart`` of
    every run that has not ended and the ``ToolStart`` of every call that has not
    ended, replayed to the newcomer alone, and then every such call is re-based:
    its producer (registered with ``rebase_on_attach``) makes its next
    ``ToolUpdate`` a base batch (``["r", state]``), so the newcomer converges on
    the call's current state without having seen it start. Listeners that were
    already there fold that base like any other (a lane host turns it into the
    small ops that changed, usually none).
    """

    def __init__(self, *, max_queue: int = DEFAULT_MAX_QUEUE) -> None:
        if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
            raise ValueError(f"EventBus max_queue must be a positive int, got {max_queue!r}")
        self._max_queue = max_queue
        self._subscriptions: list[Subscription] = []
        self._listeners: list[Listener] = []
        self._closed = False
        self._pending: deque[HarnessEvent] = deque()
        self._delivering = False
        # What a listener attaching mid-run must be told (insertion order = start order).
        self._runs: dict[str, RunStart] = {}
        self._calls: dict[str, ToolStart] = {}
        self._rebasers: dict[str, Callable[[], None]] = {}
        self.listener_errors: list[BaseException] = []
        """Exceptions raised by listeners (each such listener was detached)."""

    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._closed

    def subscribe(self, *, max_queue: int | None = None) -> Subscription:
        """Receive every event published from now on (async iteration)."""
        sub = Subscription(self, max_queue if max_queue is not None else self._max_queue)
        if self._closed:
            sub._end()
        else:
            self._subscriptions.append(sub)
            for event in self._running():
                sub._push(event)
            self._rebase_running()
        return sub

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` synchronously for every event; returns a remover.

        A listener added while calls run is first told about them (see the class
        docstring), so a lane attached mid-run shows every running call."""
        self._listeners.append(listener)
        for event in self._running():
            try:
                listener(event)
            except Exception as exc:
                self._drop_listener(listener, exc, event)
                break
        else:
            self._rebase_running()

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def rebase_on_attach(self, tool_call_id: str, rebase: Callable[[], None]) -> Callable[[], None]:
        """Register how to re-base a running call's live stream (its next ``ToolUpdate``
        becomes a base batch) when a listener or subscriber attaches mid-run; returns
        the unregister function (call it when the call's stream ends)."""
        self._rebasers[tool_call_id] = rebase

        def remove() -> None:
            if self._rebasers.get(tool_call_id) is rebase:
                del self._rebasers[tool_call_id]

        return remove

    def _running(self) -> list[HarnessEvent]:
        return [*self._runs.values(), *self._calls.values()]

    def _rebase_running(self) -> None:
        for tool_call_id in list(self._calls):
            rebase = self._rebasers.get(tool_call_id)
            if rebase is not None:
                rebase()

    def _note(self, event: HarnessEvent) -> None:
        if isinstance(event, ToolStart):
            self._calls.pop(event.tool_call_id, None)
            self._calls[event.tool_call_id] = event
        elif isinstance(event, ToolEnd):
            self._calls.pop(event.tool_call_id, None)
        elif isinstance(event, RunStart):
            self._runs[event.run_id] = event
        elif isinstance(event, RunEnd):
            self._runs.pop(event.run_id, None)

    def publish(self, event: HarnessEvent) -> None:
        """Deliver ``event`` to every listener, then enqueue it for every subscriber.

        Re-entrant: an event published from inside a listener is delivered after the
        current one, so every listener and subscriber sees one and the same order.
        """
        if self._closed:
            raise BusClosedError(
                f"publish({event.type}) on a closed EventBus; create a new bus per harness run"
            )
        self._pending.append(event)
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._pending:
                self._deliver(self._pending.popleft())
        finally:
            self._delivering = False

    def _deliver(self, event: HarnessEvent) -> None:
        self._note(event)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception as exc:
                self._drop_listener(listener, exc, event)
        for sub in list(self._subscriptions):
            sub._push(event)

    def _drop_listener(self, listener: Listener, exc: Exception, event: HarnessEvent) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)
        self.listener_errors.append(exc)
        log.error(
            "event listener %r raised %s on a %s event and was detached",
            listener,
            type(exc).__name__,
            event.type,
            exc_info=exc,
        )

    def close(self) -> None:
        """End every subscription (after its queued events) and refuse new events."""
        self._closed = True
        subs, self._subscriptions = self._subscriptions, []
        for sub in subs:
            sub._end()

    def _detach(self, sub: Subscription) -> None:
        if sub in self._subscriptions:
            self._subscriptions.remove(sub)
