"""The adaptive publisher: one pacing policy for every costly boundary.

``next_delay = max(min_interval, encoded_bytes / target_rate)`` after each
publication; the first dirty state after idle publishes at once, later writes fold
into the latest state (``produce`` is asked only when a publication is due, so there
is never a queue of payloads), one trailing timer publishes the last state, and
``finish`` forces a final publication that bypasses the deadline.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from ._errors import CallbackError, ExecConfigError
from ._limits import DEFAULT_MIN_INTERVAL, DEFAULT_TARGET_RATE

if TYPE_CHECKING:
    import asyncio

# asyncio (and inspect) are imported where they are used: a publisher whose clock is not
# the loop's and whose consumer is synchronous (a run without an event loop) needs neither.

P = TypeVar("P")


class Cancellable(Protocol):
    """A scheduled callback that can be cancelled (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None:
        """Cancel the callback if it has not run yet."""


class Clock(Protocol):
    """Time source and one-shot scheduler of a publisher (inject a fake one in tests)."""

    def now(self) -> float:
        """Current monotonic time in seconds."""

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` once after ``delay`` seconds; return a handle to cancel it."""


class LoopClock:
    """The running asyncio loop's monotonic clock and ``call_later``."""

    def now(self) -> float:
        """``loop.time()`` of the running loop."""
        import asyncio

        return asyncio.get_running_loop().time()

    def call_later(self, delay: float, callback: Callable[[], None]) -> Cancellable:
        """``loop.call_later`` on the running loop."""
        import asyncio

        return asyncio.get_running_loop().call_later(delay, callback)


class AdaptivePublisher(Generic[P]):
    """Paces publications of the latest state of something that changes fast.

    ``produce()`` is called when a publication is due: it returns
    ``(payload, encoded_bytes)`` for the latest state relative to the last published
    one and commits that as the new baseline, or ``None`` when nothing changed.
    ``consume(payload)`` delivers it; it may be sync or async. An async consumer is
    awaited before the next publication (a slow consumer slows publication, it never
    queues payloads).

    Call ``mark_dirty()`` after every change, ``force()`` to publish now bypassing
    the deadline (e.g. a spill path that must be seen at once), and ``await
    finish()`` exactly once at the end. If ``consume`` raises, the error is recorded
    (``callback_error``), ``on_error`` is told, publication stops, and ``finish()``
    raises ``CallbackError`` from it. Because the baseline is committed before
    ``consume`` runs, a failed payload is never produced again.

    The payload type is generic: shell output updates here, Chord op batches in the
    output sink.
    """

    def __init__(
        self,
        *,
        produce: Callable[[], tuple[P, int] | None],
        consume: Callable[[P], Awaitable[None] | None],
        min_interval: float = DEFAULT_MIN_INTERVAL,
        target_rate: float = DEFAULT_TARGET_RATE,
        clock: Clock | None = None,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        if not (isinstance(min_interval, int | float) and min_interval >= 0):
            raise ExecConfigError(
                f"AdaptivePublisher min_interval must be a number >= 0 (seconds), got {min_interval!r}"
            )
        if not (isinstance(target_rate, int | float) and target_rate > 0):
            raise ExecConfigError(
                f"AdaptivePublisher target_rate must be a number > 0 (bytes/second), got {target_rate!r}"
            )
        self._produce = produce
        self._consume = consume
        self._min_interval = float(min_interval)
        self._target_rate = float(target_rate)
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._on_error = on_error
        self._next_allowed = -math.inf
        self._timer: Cancellable | None = None
        self._dirty = False
        self._force_after_delivery = False
        self._inflight: asyncio.Future[None] | None = None
        self._closed = False
        self._error: BaseException | None = None
        self.publications = 0
        """How many payloads were handed to ``consume``."""
        self.published_bytes = 0
        """Sum of the ``encoded_bytes`` of those payloads."""

    @property
    def callback_error(self) -> BaseException | None:
        """The first exception raised by ``consume``, if any."""
        return self._error

    @property
    def closed(self) -> bool:
        """True once ``finish()`` has run."""
        return self._closed

    def mark_dirty(self) -> None:
        """Note that the state changed: publish now after idle, else arm the one trailing timer."""
        if self._closed or self._error is not None:
            return
        self._dirty = True
        self._schedule()

    def force(self) -> None:
        """Publish the latest state now, bypassing the deadline (not the payload bound).

        With an async delivery in flight, the publication happens as soon as it completes.
        """
        if self._closed or self._error is not None:
            return
        self._cancel_timer()
        if self._inflight is not None:
            self._force_after_delivery = True
            return
        self._publish()

    async def finish(self) -> None:
        """Force the final publication, wait for deliveries, close. Raises ``CallbackError``
        if ``consume`` ever raised."""
        if self._closed:
            return
        self._cancel_timer()
        await self._drain()
        if self._error is None:
            self._publish()
            await self._drain()
        self._closed = True
        self._cancel_timer()
        if self._error is not None:
            raise CallbackError(
                f"the update consumer raised {type(self._error).__name__}: {self._error}; "
                "fix the consumer (on_update) — the output was not delivered in full"
            ) from self._error

    # -- internals -------------------------------------------------------------------

    async def _drain(self) -> None:
        import asyncio

        while self._inflight is not None:
            fut = self._inflight
            # wait() never raises the delivery's error; _delivered records it.
            await asyncio.wait([fut])
            if self._inflight is fut:  # pragma: no cover - the done callback clears it first
                self._inflight = None

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _schedule(self) -> None:
        if self._inflight is not None or self._timer is not None:
            return  # the delivery's completion or the armed timer will publish
        now = self._clock.now()
        if now >= self._next_allowed:
            self._publish()
        else:
            self._timer = self._clock.call_later(self._next_allowed - now, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._dirty and not self._closed and self._error is None:
            self._schedule()

    def _publish(self) -> None:
        self._dirty = False
        produced = self._produce()
        if produced is None:
            return
        payload, size = produced
        # The baseline is committed by produce(); the deadline is set before delivery so
        # a consumer that re-enters mark_dirty() cannot trigger a second publication now.
        self._next_allowed = self._clock.now() + max(self._min_interval, size / self._target_rate)
        self.publications += 1
        self.published_bytes += size
        try:
            result = self._consume(payload)
        except Exception as exc:
            self._fail(exc)
            return
        if result is None:
            return  # a synchronous consumer
        import asyncio
        import inspect

        if inspect.isawaitable(result):
            fut = asyncio.ensure_future(result)
            self._inflight = fut
            fut.add_done_callback(self._delivered)

    def _delivered(self, fut: asyncio.Future[None]) -> None:
        import asyncio

        if self._inflight is fut:
            self._inflight = None
        if fut.cancelled():
            self._fail(asyncio.CancelledError("the update consumer was cancelled"))
            return
        exc = fut.exception()
        if exc is not None:
            self._fail(exc)
            return
        if self._closed or self._error is not None:
            return
        if self._force_after_delivery:
            self._force_after_delivery = False
            self._publish()
        elif self._dirty:
            self._schedule()

    def _fail(self, exc: BaseException) -> None:
        if self._error is not None:
            return
        self._error = exc
        self._cancel_timer()
        if self._on_error is not None:
            self._on_error(exc)
