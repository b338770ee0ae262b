"""The change signal of a repository: wake whoever waits for a session to pass a seq.

A server following sessions live must learn that another process committed, without
re-reading every session on a timer. Each backend has one cheap way to notice a
commit from elsewhere, run by ONE watcher task per repository whatever the number of
waiters (see ``Repository.wait_for_change`` and docs/storage.md, "Following changes"):

- memory: nothing to watch (every writer is in this process);
- SQLite: ``PRAGMA data_version`` on the repository's connection, which moves when
  another connection commits; only then is ``sessions.next_seq`` read;
- PostgreSQL: one ``LISTEN`` connection, whose notifications name session and seq;
- JSONL: the sizes of the session's files; only the new bytes are scanned for seqs.

Commits made through this repository's own sessions are announced directly.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

__all__ = ["CHANGE_POLL_INTERVAL", "ChangeWaiters", "Waiter"]

CHANGE_POLL_INTERVAL = 0.05
"""Seconds between two checks of the backends that must look (SQLite's
``data_version``, JSONL file sizes), and only while someone waits."""


@dataclass(eq=False)
class Waiter:
    """One ``wait_for_change`` call: its session, the seq it waits past, its future."""

    name: str
    after: int
    future: asyncio.Future[int] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class ChangeWaiters:
    """The waiters of one repository, by session name."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[Waiter]] = {}
        self._nonempty = asyncio.Event()

    def add(self, name: str, after: int) -> Waiter:
        waiter = Waiter(name, after)
        self._waiting.setdefault(name, set()).add(waiter)
        self._nonempty.set()
        return waiter

    def discard(self, waiter: Waiter) -> None:
        found = self._waiting.get(waiter.name)
        if found is None:
            return
        found.discard(waiter)
        if not found:
            del self._waiting[waiter.name]
            if not self._waiting:
                self._nonempty.clear()

    @property
    def names(self) -> list[str]:
        """The sessions someone waits for now."""
        return sorted(self._waiting)

    def lowest(self, name: str) -> int | None:
        """The smallest seq waited past for ``name`` (``None``: nobody waits for it)."""
        found = self._waiting.get(name)
        return min(w.after for w in found) if found else None

    async def wait_nonempty(self) -> None:
        """Return once someone waits (a watcher that must look rests otherwise)."""
        await self._nonempty.wait()

    def publish(self, name: str, high: int) -> None:
        """Session ``name`` reached seq ``high``: wake every waiter below it."""
        for waiter in self._waiting.get(name, ()):
            if waiter.after < high and not waiter.future.done():
                waiter.future.set_result(high)

    def fail(self, exc: BaseException) -> None:
        """The watcher stopped: every current waiter gets ``exc``."""
        for found in self._waiting.values():
            for waiter in found:
                if not waiter.future.done():
                    waiter.future.set_exception(exc)
