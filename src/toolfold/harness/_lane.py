"""The lane host that replicates a lane view as Chord ops, and the router of lanes.

``LaneHost`` runs the lane reducer (``reduce_lane_snapshot``, in ``_lane_view.py``)
on a view held by a Chord tracker; the tracker turns the reducer's mutations into
ops, which the host encodes and fans out to subscribers. The harness itself never
emits lane ops.

``Lanes`` routes a harness's event stream to one host per lane (a ``RunStart``
names the lane; later events of that run follow it).
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from toolfold import _json, _otel, chord
from toolfold.chord import Encoder

from ._lane_view import (
    DEFAULT_SETTLED_TOOLS,
    DEFAULT_TRANSCRIPT_TAIL,
    LaneOperation,
    LaneTool,
    LaneView,
    new_lane_view,
    reduce_lane_snapshot,
)
from .events import HarnessEvent, RunStart

__all__ = [
    "DEFAULT_BUFFER_BATCHES",
    "DEFAULT_BUFFER_BYTES",
    "DEFAULT_SETTLED_TOOLS",
    "DEFAULT_TRANSCRIPT_TAIL",
    "LaneBatch",
    "LaneClosedError",
    "LaneError",
    "LaneHost",
    "LaneOperation",
    "LaneSubscription",
    "LaneTool",
    "LaneView",
    "Lanes",
    "new_lane_view",
    "reduce_lane_snapshot",
]

log = logging.getLogger("toolfold.harness.lane")

DEFAULT_BUFFER_BATCHES = 256
"""Per-subscriber backlog bound, in batches, before the backlog is replaced by a fresh base."""

DEFAULT_BUFFER_BYTES = 8 * 1024 * 1024
"""Per-subscriber backlog bound, in encoded bytes, before the backlog is replaced by a fresh base."""


class LaneError(Exception):
    """Root of the errors the lane host raises."""


class LaneClosedError(LaneError):
    """Raised when subscribing to or publishing on a host that was closed."""


def _dumps(wire: Any) -> str:
    """Wire JSON text. The codec refuses lone surrogates, which a ``t`` that splits an
    astral character legitimately leaves (as JavaScript does); those batches are
    written with ``\\udxxx`` escapes, which every JSON parser reads back as the
    same lone code unit."""
    try:
        return _json.dumps(wire).decode()
    except TypeError:
        return json.dumps(wire, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True, slots=True)
class LaneBatch:
    """One batch as delivered to a subscriber: its SSE ``id`` and the JSON wire text."""

    id: int
    data: str
    base: bool


class _Group:
    """Subscribers whose streams have had the identical history share one encoder.

    An encoder's output depends only on the batches it has seen since its last
    base; subscribers that joined between the same two publishes get the same
    base and then the same batches, so their streams are byte-identical. One
    encoder per *distinct* stream, which is what "one encoder per subscription"
    protects (ids from one stream are meaningless in another), at O(1) encoding
    cost per publish instead of O(subscribers).
    """

    __slots__ = ("base_data", "encoder", "members")

    def __init__(self, snapshot: Any) -> None:
        self.encoder = Encoder()
        self.members: set[LaneSubscription] = set()
        self.base_data = _dumps(self.encoder.encode([["r", snapshot]]))


class LaneSubscription:
    """One subscriber's stream of wire batches: a base first, then deltas.

    Iterate with ``async for``; the iteration ends when the subscription or its
    host is closed. Ids start at 0 and are consecutive. When the backlog passes
    the host's bound the backlog is dropped and the next batch is a fresh base
    (still the next consecutive id); a consumer that folds ``r`` by replacing its
    value converges without reconnecting.
    """

    def __init__(self, host: LaneHost) -> None:
        self._host = host
        self._buffer: collections.deque[tuple[str, bool]] = collections.deque()
        self._buffered_bytes = 0
        self._wake = asyncio.Event()
        self._next_id = 0
        self._closed = False
        self._needs_base = False
        self._group: _Group | None = None
        self.resyncs = 0
        """How many times the backlog overflowed and was replaced by a fresh base."""

    @property
    def buffered_batches(self) -> int:
        """Batches waiting to be read."""
        return len(self._buffer)

    @property
    def buffered_bytes(self) -> int:
        """Encoded bytes waiting to be read."""
        return self._buffered_bytes

    @property
    def closed(self) -> bool:
        """Whether the subscription ended (closed by the consumer or by the host)."""
        return self._closed

    def _push(self, data: str, base: bool) -> None:
        if self._closed or self._needs_base:
            return
        if base:
            # A base batch supersedes everything before it (the consumer's decoder
            # and value both reset on `r`), so the backlog can go. This also keeps
            # a base that alone exceeds the byte bound deliverable.
            self._buffer.clear()
            self._buffered_bytes = 0
        self._buffer.append((data, base))
        self._buffered_bytes += len(data)
        host = self._host
        if not base and (
            len(self._buffer) > host.buffer_batches or self._buffered_bytes > host.buffer_bytes
        ):
            # Slow consumer: forget the backlog (memory stays bounded) and owe it
            # a fresh base, taken lazily when it next reads, so nothing
            # accumulates while it stays slow.
            self._buffer.clear()
            self._buffered_bytes = 0
            self._needs_base = True
            self.resyncs += 1
            host._leave_group(self)
        self._wake.set()

    def _end(self) -> None:
        self._closed = True
        self._buffer.clear()
        self._buffered_bytes = 0
        self._wake.set()

    def close(self) -> None:
        """Unsubscribe; a pending or later read ends the iteration."""
        if not self._closed:
            self._host._unsubscribe(self)
            self._end()

    def next_nowait(self) -> LaneBatch | None:
        """The next batch if one is ready (``None`` if none is, or the stream ended)."""
        if self._closed:
            return None
        if self._needs_base:
            self._needs_base = False
            self._host._join_with_base(self)
        if not self._buffer:
            self._wake.clear()
            return None
        data, base = self._buffer.popleft()
        self._buffered_bytes -= len(data)
        batch = LaneBatch(self._next_id, data, base)
        self._next_id += 1
        return batch

    async def wait(self) -> None:
        """Wait until a batch may be ready or the stream ended (then call ``next_nowait``)."""
        if not self._closed and not self._buffer and not self._needs_base:
            await self._wake.wait()

    def __aiter__(self) -> AsyncIterator[LaneBatch]:
        return self

    async def __anext__(self) -> LaneBatch:
        while True:
            batch = self.next_nowait()
            if batch is not None:
                return batch
            if self._closed:
                raise StopAsyncIteration
            await self._wake.wait()


class LaneHost:
    """Runs the lane reducer on a tracked view and publishes the ops to subscribers.

    ``handle(event)`` reduces the event into the tracked view, flushes the
    tracker and fans the batch out. ``subscribe()`` returns a stream that starts
    with the current view as a base batch and continues with every later batch.
    Single-threaded: call it from the event loop that consumes the subscriptions.
    """

    def __init__(
        self,
        lane: str,
        *,
        transcript_tail: int = DEFAULT_TRANSCRIPT_TAIL,
        settled_tools: int = DEFAULT_SETTLED_TOOLS,
        buffer_batches: int = DEFAULT_BUFFER_BATCHES,
        buffer_bytes: int = DEFAULT_BUFFER_BYTES,
    ) -> None:
        if buffer_batches < 1 or buffer_bytes < 1:
            raise ValueError(
                f"LaneHost buffer bounds must be positive, got buffer_batches={buffer_batches}, "
                f"buffer_bytes={buffer_bytes}; use at least 1"
            )
        self.lane = lane
        self.transcript_tail = transcript_tail
        self.settled_tools = settled_tools
        self.buffer_batches = buffer_batches
        self.buffer_bytes = buffer_bytes
        self._tracker = chord.track(new_lane_view(lane))
        self._tracker.flush()  # the tracker's first flush is its base; subscribers get their own
        self._groups: list[_Group] = []
        self._fresh: _Group | None = None  # the group joined by subscribers since the last publish
        self._subscribers: set[LaneSubscription] = set()
        self._closed = False
        self.published = 0
        """How many batches were published (reducer changes that produced ops)."""

    @property
    def view(self) -> LaneView:
        """The current plain lane view (read-only by convention: mutate via ``handle``)."""
        target: LaneView = self._tracker.target
        return target

    @property
    def subscribers(self) -> int:
        """Number of open subscriptions."""
        return len(self._subscribers)

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closed

    @property
    def idle(self) -> bool:
        """No subscriber, no operation running and no call running: dropping the host
        loses nothing but the settled calls its view still shows."""
        view = self.view
        operation = view["operation"]
        return (
            not self._subscribers
            and (operation is None or operation["status"] != "running")
            and all(tool["status"] != "running" for tool in view["tools"].values())
        )

    def backlogs(self) -> list[tuple[int, int]]:
        """``(batches, bytes)`` waiting in each open subscription's buffer."""
        return [(s.buffered_batches, s.buffered_bytes) for s in self._subscribers]

    def handle(self, event: HarnessEvent) -> None:
        """Reduce ``event`` into the view and publish the resulting ops (if any)."""
        if self._closed:
            raise LaneClosedError(
                f"lane {self.lane!r} is closed; event {event.type} was not applied — "
                "create a new LaneHost to keep reducing"
            )
        try:
            reduce_lane_snapshot(
                self._tracker.state,
                event,
                transcript_tail=self.transcript_tail,
                settled_tools=self.settled_tools,
            )
        except Exception as exc:
            # Whatever the reducer changed before failing was recorded by the
            # tracker, so publishing it keeps every replica equal to the view.
            self._flush()
            raise LaneError(
                f"lane {self.lane!r} could not reduce a {event.type} event "
                f"({type(exc).__name__}: {exc}); the view keeps what was applied before"
            ) from exc
        self._flush()

    def _flush(self) -> None:
        ops = self._tracker.flush()
        if ops:
            self._publish(ops)

    def _publish(self, ops: list[Any]) -> None:
        self.published += 1
        if self._fresh is not None:
            # Nobody can join this group any more, so its base text is garbage now.
            self._fresh.base_data = ""
            self._fresh = None
        base = bool(ops) and ops[0][0] == "r"
        # Copies: a member that overflows leaves its group while we push, and an
        # emptied group leaves the list.
        for group in list(self._groups):
            data = _dumps(group.encoder.encode(ops))
            for sub in list(group.members):
                sub._push(data, base)

    def subscribe(self) -> LaneSubscription:
        """A new subscription: the current view as base batch 0, then every later batch."""
        if self._closed:
            raise LaneClosedError(f"lane {self.lane!r} is closed; subscribe to a live host instead")
        sub = LaneSubscription(self)
        self._subscribers.add(sub)
        self._join_with_base(sub)
        return sub

    def _join_with_base(self, sub: LaneSubscription) -> None:
        # The snapshot and the registration happen in one synchronous step, so
        # nothing published can fall between the base and the buffered deltas.
        group = self._fresh
        if group is None:
            group = _Group(self._tracker.target)
            self._groups.append(group)
            self._fresh = group
        group.members.add(sub)
        sub._group = group
        sub._push(group.base_data, True)

    def _leave_group(self, sub: LaneSubscription) -> None:
        group = sub._group
        if group is None:
            return
        group.members.discard(sub)
        sub._group = None
        if not group.members:
            self._groups.remove(group)
            if self._fresh is group:
                self._fresh = None

    def _unsubscribe(self, sub: LaneSubscription) -> None:
        self._subscribers.discard(sub)
        self._leave_group(sub)

    def close(self) -> None:
        """End every subscription (their iterations finish) and refuse new work."""
        self._closed = True
        for sub in list(self._subscribers):
            self._leave_group(sub)
            sub._end()
        self._subscribers.clear()


class Lanes:
    """One ``LaneHost`` per lane, fed from a harness event stream.

    A ``RunStart`` names its lane; the run's later events follow it. Events of a
    run this router never saw start go to ``default_lane``. Attach ``handle`` as a
    synchronous listener of the harness bus.
    """

    def __init__(
        self, *, default_lane: str = "default", remember_runs: int = 4096, **host_options: Any
    ) -> None:
        self.default_lane = default_lane
        self._hosts: dict[str, LaneHost] = {}
        self._runs: collections.OrderedDict[str, str] = collections.OrderedDict()
        self._remember_runs = remember_runs
        self._host_options = host_options
        self._closed = False
        self.errors: list[LaneError] = []
        """The last (at most 100) reduction failures, newest last."""
        # The toolfold.lane.* metrics read otel_counts() while this object lives.
        _otel.counted(self)
        _otel.meters()  # makes the instruments when a meter provider is set

    def otel_counts(self) -> tuple[int, int]:
        """Lanes and subscribers now (the ``toolfold.lane.*`` metrics)."""
        hosts = list(self._hosts.values())  # read from the metric reader's thread
        return len(hosts), sum(host.subscribers for host in hosts)

    def host(self, lane: str) -> LaneHost:
        """The host of ``lane`` (created empty on first use)."""
        host = self._hosts.get(lane)
        if host is None:
            if self._closed:
                raise LaneClosedError(f"lanes are closed; lane {lane!r} cannot be created")
            host = LaneHost(lane, **self._host_options)
            self._hosts[lane] = host
        return host

    def get(self, lane: str) -> LaneHost | None:
        """The host of ``lane`` if it exists (never creates one)."""
        return self._hosts.get(lane)

    def names(self) -> list[str]:
        """Lane names, in creation order."""
        return list(self._hosts)

    def discard(self, lane: str) -> bool:
        """Drop the host of ``lane`` if it is ``idle``; returns whether it was dropped.

        A later event of the lane (or ``host(lane)``) starts it again, empty.
        """
        host = self._hosts.get(lane)
        if host is None or not host.idle:
            return False
        del self._hosts[lane]
        host.close()
        return True

    def handle(self, event: HarnessEvent) -> None:
        """Route ``event`` to its lane's host."""
        if self._closed:
            return
        if isinstance(event, RunStart):
            self._runs[event.run_id] = event.lane
            self._runs.move_to_end(event.run_id)
            while len(self._runs) > self._remember_runs:
                self._runs.popitem(last=False)
            lane = event.lane
        else:
            lane = self._runs.get(event.run_id, self.default_lane)
        try:
            self.host(lane).handle(event)
        except LaneError as exc:
            # A listener that raises is detached from the harness bus; one bad
            # event must not stop the lane from following later ones.
            self.errors.append(exc)
            del self.errors[:-100]
            log.error("%s", exc)

    def close(self) -> None:
        """Close every host (ending their subscriptions)."""
        self._closed = True
        for host in self._hosts.values():
            host.close()
