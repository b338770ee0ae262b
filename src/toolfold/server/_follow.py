"""Stored sessions shown live: one task per followed session feeds its lane.

Each task sleeps on the store's change signal (``Repository.wait_for_change``: one
watcher per repository, whatever the number of sessions followed) and reads the
session only when it moved, so an idle followed session costs no read at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from toolfold import _otel
from toolfold.harness import DurabilityError, LaneError, LaneHost, Lanes
from toolfold.history import SessionFollower
from toolfold.storage import StorageError

from ._sessions import SessionPool

__all__ = ["IDLE_SECONDS", "SAFETY_POLL", "Followers"]

log = logging.getLogger("toolfold.server")

SAFETY_POLL = 5.0
"""Seconds after which a follower reads its session even without a change signal: a
backstop, never the way a checkpoint normally reaches the lane (the store's change
signal wakes the follower within ~50 ms of a commit; docs/storage.md)."""

IDLE_SECONDS = 10.0
"""A follower without a subscriber for this long stops (a new GET starts it again)."""


class Followers:
    """The followers of one app: ``ensure(name)`` starts following stored session
    ``name`` into lane ``name`` (once); ``aclose()`` stops them all."""

    def __init__(
        self,
        pool: SessionPool,
        lanes: Lanes,
        *,
        safety_poll: float = SAFETY_POLL,
        idle: float = IDLE_SECONDS,
    ) -> None:
        self.pool = pool
        self.lanes = lanes
        self.safety_poll = safety_poll
        self.idle = idle
        self._tasks: dict[str, tuple[asyncio.Task[None], LaneHost]] = {}

    @property
    def following(self) -> list[str]:
        """Names of the sessions followed right now."""
        return sorted(self._tasks)

    def ensure(self, name: str) -> None:
        """Follow session ``name`` into lane ``name`` unless that is already done.

        A lane dropped while idle and made again is a new host: its follower starts
        anew (the old one, feeding a closed host, is cancelled)."""
        host = self.lanes.host(name)
        current = self._tasks.get(name)
        if current is not None:
            task, followed = current
            if followed is host and not task.done():
                return
            task.cancel()
        task = asyncio.create_task(self._follow(name, host), name=f"toolfold follow {name}")
        self._tasks[name] = (task, host)

        def forget(done: asyncio.Task[None]) -> None:
            if self._tasks.get(name, (None, None))[0] is done:
                del self._tasks[name]

        task.add_done_callback(forget)

    async def _follow(self, name: str, host: LaneHost) -> None:
        # A reader of its own, never the pool's writer: holding a JSONL writer would
        # lock the session against `toolfold run --session` in another process.
        repository = self.pool.repository
        loop = asyncio.get_running_loop()
        session = await repository.open_session(name, read_only=True)
        try:
            follower = SessionFollower(session, name)
            seen = session.next_seq - 1
            watched = loop.time()
            signalled: float | None = None  # when the store said the session moved
            while not host.closed:
                try:
                    await session.refresh()
                    for event in await follower.poll():
                        host.handle(event)
                except (StorageError, DurabilityError, LaneError) as exc:
                    # A damaged record or a failing store: say so, keep following.
                    log.error("following session %r: %s", name, exc)
                if signalled is not None:
                    meters = _otel.meters()
                    if meters is not None:
                        meters.follower_lag.record(loop.time() - signalled)
                    signalled = None
                if host.subscribers:
                    watched = loop.time()
                elif loop.time() - watched >= self.idle:
                    return
                # A settlement waiting for its run record is read again soon even if
                # the record never comes (its wait ends by deadline, not by a commit).
                wait = 0.1 if follower.holding else min(self.safety_poll, self.idle)
                try:
                    async with asyncio.timeout(wait):
                        seen = await repository.wait_for_change(name, seen)
                    signalled = loop.time()
                except TimeoutError:
                    pass  # the backstop read, and a look at the subscribers
                except StorageError as exc:
                    log.error("waiting for changes of session %r: %s", name, exc)
                    await asyncio.sleep(self.safety_poll)
        finally:
            await asyncio.shield(session.close())

    async def aclose(self) -> None:
        """Stop every follower (their sessions go back to the pool)."""
        tasks = [task for task, _ in self._tasks.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
