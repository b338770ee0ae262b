"""Stored sessions shown live: one polling task per followed session feeds its lane."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from toolfold.harness import DurabilityError, LaneError, LaneHost, Lanes
from toolfold.history import SessionFollower
from toolfold.storage import Repository, StorageError

from ._sessions import SessionPool

__all__ = ["DEFAULT_FOLLOW_INTERVAL", "Followers"]

log = logging.getLogger("toolfold.server")

DEFAULT_FOLLOW_INTERVAL = 0.25
"""Seconds between two polls of a followed session (a durable checkpoint reaches the
lane within about this plus the writer's checkpoint interval)."""

IDLE_POLLS = 40
"""Polls without a subscriber after which a follower stops (10 s at the default)."""


def follows_across_processes(repository: Repository) -> bool:
    """Whether another process can write a session while this one reads it.

    A JSONL session is locked by the process that opened it (one writer per file), so
    holding it open to follow it would make ``toolfold run --session S`` fail there;
    SQLite, PostgreSQL and memory stores have no such lock.
    """
    from toolfold.storage._jsonl import JsonlRepository

    return not isinstance(repository, JsonlRepository)


class Followers:
    """The followers of one app: ``ensure(name)`` starts following stored session
    ``name`` into lane ``name`` (once); ``aclose()`` stops them all."""

    def __init__(
        self, pool: SessionPool, lanes: Lanes, *, interval: float = DEFAULT_FOLLOW_INTERVAL
    ) -> None:
        self.pool = pool
        self.lanes = lanes
        self.interval = interval
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
        idle = 0
        async with self.pool.use(name) as session:
            follower = SessionFollower(session, name)
            while not host.closed:
                try:
                    for event in await follower.poll():
                        host.handle(event)
                except (StorageError, DurabilityError, LaneError) as exc:
                    # A damaged record or a failing store: say so, keep following.
                    log.error("following session %r: %s", name, exc)
                idle = idle + 1 if host.subscribers == 0 else 0
                if idle >= IDLE_POLLS:
                    return
                await asyncio.sleep(self.interval)

    async def aclose(self) -> None:
        """Stop every follower (their sessions go back to the pool)."""
        tasks = [task for task, _ in self._tasks.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
