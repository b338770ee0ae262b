"""Test helpers for toolfold.harness: a manual clock for the executor's throttle timers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class FakeClock:
    """A manual clock: timers fire only when the test advances time (all that are due,
    in the order they were set, with ``now()`` already at the new time)."""

    def __init__(self) -> None:
        self.t = 0.0
        self.timers: list[tuple[float, Callable[[], None], list[bool]]] = []

    def now(self) -> float:
        return self.t

    def call_later(self, delay: float, callback: Callable[[], None]) -> Any:
        cancelled = [False]
        self.timers.append((self.t + delay, callback, cancelled))

        class Handle:
            def cancel(self) -> None:
                cancelled[0] = True

        return Handle()

    def advance(self, dt: float) -> None:
        self.t += dt
        due = [t for t in self.timers if t[0] <= self.t]
        self.timers = [t for t in self.timers if t[0] > self.t]
        for _, cb, cancelled in due:
            if not cancelled[0]:
                cb()
