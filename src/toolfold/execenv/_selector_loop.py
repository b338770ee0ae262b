"""A minimal synchronous event loop over ``selectors``: readers, timers and wake-ups from
other threads, run one turn at a time by its owner.

It offers the few loop methods the exec env's pipe reader and publisher call
(``add_reader``, ``remove_reader``, ``call_later``, ``call_soon_threadsafe``, and
``now``/``time``: the publisher's ``Clock``), so that a process with one command to run
and nothing else to wait for (``toolfold run``'s direct path) reads, bounds and paces
its output with the same code as ``LocalExecEnv`` on asyncio, without importing asyncio.
The owner decides when it is done: ``run_once(timeout)`` runs at most one turn.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import selectors
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SelectorLoop", "TimerHandle"]


class TimerHandle:
    """A callback scheduled by :meth:`SelectorLoop.call_later`; ``cancel()`` drops it."""

    __slots__ = ("_args", "_callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.when = when
        self._callback = callback
        self._args = args
        self.cancelled = False

    def cancel(self) -> None:
        """Do not run the callback (a no-op once it ran)."""
        self.cancelled = True

    def _run(self) -> None:
        if not self.cancelled:
            self.cancelled = True  # runs once
            self._callback(*self._args)


class Future:
    """The least of a future the spill file's writer needs: set once, then done."""

    __slots__ = ("_done", "_result")

    def __init__(self) -> None:
        self._done = False
        self._result: Any = None

    def done(self) -> bool:
        """Whether a result was set."""
        return self._done

    def set_result(self, result: Any) -> None:
        """Set the result (once)."""
        self._done, self._result = True, result

    def result(self) -> Any:
        """The result."""
        return self._result


class SelectorLoop:
    """Readers and timers on one thread (its owner's), plus ``call_soon_threadsafe``.

    Callbacks run inside :meth:`run_once`, on the owner's thread, in this order: ready
    readers, then due timers, then callbacks queued from other threads. A callback that
    raises propagates out of ``run_once`` (nothing is swallowed).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._selector = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, TimerHandle]] = []
        self._order = itertools.count()
        self._soon: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
        self._soon_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._closed = False

    # -- the loop methods the exec env calls ----------------------------------------------

    def time(self) -> float:
        """The loop's monotonic clock (seconds)."""
        return self._clock()

    def now(self) -> float:
        """:meth:`time` (the publisher's ``Clock`` protocol)."""
        return self._clock()

    def add_reader(self, fd: int, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)`` whenever ``fd`` is readable (replaces an earlier one)."""
        entry = (callback, args)
        try:
            self._selector.modify(fd, selectors.EVENT_READ, entry)
        except KeyError:
            self._selector.register(fd, selectors.EVENT_READ, entry)

    def remove_reader(self, fd: int) -> bool:
        """Stop watching ``fd``; whether it was watched."""
        try:
            self._selector.unregister(fd)
        except (KeyError, ValueError):
            return False
        return True

    def call_later(self, delay: float, callback: Callable[..., Any], *args: Any) -> TimerHandle:
        """Run ``callback(*args)`` ``delay`` seconds from now (in a later turn)."""
        handle = TimerHandle(self._clock() + max(0.0, delay), callback, args)
        heapq.heappush(self._timers, (handle.when, next(self._order), handle))
        return handle

    def create_future(self) -> Future:
        """A future set from this loop's callbacks."""
        return Future()

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any) -> None:
        """From any thread: run ``callback(*args)`` in the owner's next turn (it wakes)."""
        with self._soon_lock:
            self._soon.append((callback, args))
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"\0")

    # -- running ------------------------------------------------------------------------

    def next_timer(self) -> float | None:
        """Seconds until the earliest live timer (0 if due), or ``None`` without one."""
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        if not self._timers:
            return None
        return max(0.0, self._timers[0][0] - self._clock())

    def run_once(self, timeout: float | None) -> None:
        """One turn: wait at most ``timeout`` seconds (``None``: until something
        happens; capped by the earliest timer) for a reader, then run what is ready."""
        due = self.next_timer()
        if due is not None:
            timeout = due if timeout is None else min(timeout, due)
        for key, _ in self._selector.select(timeout):
            if key.data is None:  # the wake-up pipe
                with contextlib.suppress(BlockingIOError, OSError):
                    os.read(self._wake_r, 4096)
                continue
            # A callback may have removed this reader (or closed its fd) in this turn.
            if self._selector.get_map().get(key.fd) is key:
                callback, args = key.data
                callback(*args)
        now = self._clock()
        while self._timers and (self._timers[0][0] <= now or self._timers[0][2].cancelled):
            _, _, handle = heapq.heappop(self._timers)
            handle._run()
        with self._soon_lock:
            soon, self._soon = self._soon, []
        for callback, args in soon:
            callback(*args)

    def close(self) -> None:
        """Release the selector and the wake-up pipe (readers still added are dropped)."""
        if self._closed:
            return
        self._closed = True
        self._selector.close()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)
