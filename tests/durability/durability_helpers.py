"""Helpers of the durability tests: a session tap for crashes and delays, and a store
that can 'restart' (imported by basename, like the other test directories' helpers)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# The store helper of the storage tests, imported by basename like they do (appended, so
# nothing here shadows this directory's own modules).
sys.path.append(str(Path(__file__).resolve().parents[1] / "storage"))

from storage_backends import Store as BackendStore

from toolfold.storage import Session

#: The backends every durability behaviour is checked on (PostgreSQL: see test_durability_pg).
BACKENDS = ["memory", "jsonl", "sqlite"]

#: Rounds of a bounded wait that yields to the event loop once per round.
SETTLE_ROUNDS = 500
#: The real ``asyncio.sleep``, for yielding even where a test replaced it.
_yield = asyncio.sleep


class SimulatedCrash(BaseException):
    """Raised by :class:`Tap` in place of a storage call: the process 'died' there.

    A ``BaseException`` so that no ``except Exception`` in the code under test can
    swallow it, the way nothing survives a SIGKILL."""


class Tap:
    """A session wrapper: counts commits, 'crashes' before commit #k, or holds a commit
    until an event is set (before it enters the session line, or inside it)."""

    def __init__(self, inner: Session) -> None:
        self.inner = inner
        self.commits = 0
        self.crash_at: int | None = None
        self.hold_at: int | None = None
        self.hold_inside = False
        self.release = asyncio.Event()
        self.held = asyncio.Event()
        self.fail_at: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, writes: Sequence[Any] | Callable[[], Sequence[Any]], **kw: Any) -> Any:
        await self._gate()
        return await self.inner.commit(writes, **kw)

    async def commit_across(self, session_writes: Any, scope_writes: Any, **kw: Any) -> Any:
        """One commit, as far as counting, crashing and holding go."""
        await self._gate()
        return await self.inner.commit_across(session_writes, scope_writes, **kw)

    async def _gate(self) -> None:
        self.commits += 1
        n = self.commits
        if self.crash_at is not None and n >= self.crash_at:
            raise SimulatedCrash(f"crash before commit #{n}")
        if self.fail_at == n:
            from toolfold.storage import BackendError

            raise BackendError(f"injected failure of commit #{n}")
        if self.hold_at == n and not self.hold_inside:
            # A slow request: it has not reached the session line yet.
            self.held.set()
            await self.release.wait()
        if self.hold_at == n and self.hold_inside:
            # A slow write: it holds the session line (its payload is already computed)
            # while the backend "writes"; every later commit queues behind it.
            inner: Any = self.inner
            original = inner._commit_writes

            async def slow(ws: Any, scope: Any) -> Any:
                inner._commit_writes = original
                self.held.set()
                await self.release.wait()
                return await original(ws, scope)

            inner._commit_writes = slow


async def wait_reached(reached: asyncio.Event, task: asyncio.Future[Any]) -> None:
    """Wait until ``reached`` is set, failing at once if ``task`` ends first: a run that broke
    never reaches its gate, and waiting on the gate alone would hang the test."""
    waiter = asyncio.ensure_future(reached.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if not reached.is_set():
        task.result()  # raises whatever ended it
        raise AssertionError(f"the task ended before it reached its gate: {task}")


class Store(BackendStore):
    """A store of the storage tests' kind (storage_backends.py) that can also 'restart'
    a session held through a :class:`Tap`."""

    async def restart(self, session: Session | Tap) -> Session:
        """Close everything (the process 'died') and open the session from its store."""
        return await self.reopen(session.inner if isinstance(session, Tap) else session)


class Clock:
    """A clock the test moves by hand (``clock.now += 6``), for leases and pacing."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingReads:
    """A session wrapper that records the ``limit`` of every call of ``method``
    (``read_entries``, ``read_list``): how much one read may bring in. A cursor that does
    not move fails the test after 20 reads instead of spinning."""

    def __init__(self, inner: Session, method: str) -> None:
        self.inner, self.method = inner, method
        self.limits: list[Any] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name != self.method:
            return attr

        async def counted(*args: Any, **kw: Any) -> Any:
            self.limits.append(kw.get("limit"))
            if len(self.limits) > 20:
                raise AssertionError(f"{self.method} keeps being called: {self.limits}")
            return await attr(*args, **kw)

        return counted


class HeldTimers:
    """The loop timers an object of type ``of`` asks for (a lease's heartbeat beats, a
    stream's trailing checkpoint), held for the test to fire by hand: each is recorded (its
    delay and callback) and parked on a real timer an hour away, which the code under test
    cancels like any other. Nothing is timed; other timers are left alone."""

    def __init__(self, real: Callable[..., asyncio.TimerHandle], of: type) -> None:
        self.real, self.of = real, of
        self.asked: list[tuple[float, Callable[..., object], tuple[Any, ...], Any]] = []

    def call_later(
        self, delay: float, callback: Callable[..., object], *args: Any, **kw: Any
    ) -> Any:
        held = isinstance(getattr(callback, "__self__", None), self.of)
        handle = self.real(3600 if held else delay, callback, *args, **kw)
        if held:
            self.asked.append((delay, callback, args, handle))
        return handle

    @property
    def delays(self) -> list[float]:
        return [delay for delay, *_ in self.asked]

    def pending(self) -> list[Any]:
        return [h for _, _, _, h in self.asked if not h.cancelled()]

    def fire(self) -> None:
        """Run the one pending timer now (as the loop would once its delay passed)."""
        [handle] = self.pending()
        _, callback, args, _ = next(b for b in self.asked if b[3] is handle)
        handle.cancel()
        callback(*args)


def hold_timers(monkeypatch: Any, of: type) -> HeldTimers:
    """Hold the running loop's timers of objects of type ``of`` (see :class:`HeldTimers`)."""
    loop = asyncio.get_running_loop()
    held = HeldTimers(loop.call_later, of)
    monkeypatch.setattr(loop, "call_later", held.call_later)
    return held


async def settle_until(done: Callable[[], bool]) -> None:
    """Yield to the loop (bounded) until ``done()``."""
    for _ in range(SETTLE_ROUNDS):
        if done():
            return
        await _yield(0)
    raise AssertionError("still not there after yielding to the loop")


async def trailing_done(ds: Any) -> asyncio.Task[None] | None:
    """Wait until a durable stream's trailing checkpoint has started (its timer fired)
    and ended; return its task (``None`` if none ran). Never sleeps: the timer is due at
    once (interval 0) or held by :class:`HeldTimers` and fired by the test."""
    await settle_until(lambda: ds._timer is None)
    task: asyncio.Task[None] | None = ds._trailer
    if task is not None:
        await asyncio.wait([task], timeout=10)
        assert task.done()
    return task
