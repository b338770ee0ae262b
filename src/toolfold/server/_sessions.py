"""Open sessions of a store, shared by the command runner and the JSON API of one server."""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolfold.storage import Repository, Session

__all__ = ["SessionPool", "session_pool"]


@dataclass
class _Held:
    session: Session
    users: int = 0


class SessionPool:
    """Hands out the one open ``Session`` per name that a repository allows.

    A repository refuses to open a session twice (the session's commit line lives in
    that one object), yet a command may be running in session ``main`` while a reader
    asks the API for its calls. Both take it from here: ``async with pool.use(name)``
    opens it on first use, shares it while anyone holds it, and closes it when the last
    holder leaves — so a JSONL session is not kept locked against other processes
    between commands.
    """

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self._open: dict[str, _Held] = {}
        self._lock = asyncio.Lock()

    async def list_sessions(self) -> list[str]:
        """The store's session names, sorted."""
        return await self.repository.list_sessions()

    @contextlib.asynccontextmanager
    async def use(self, name: str, *, create: bool = False) -> AsyncIterator[Session]:
        """The open session ``name`` (created when ``create``; storage errors such as
        ``SessionNotFoundError`` pass through).

        Without ``create`` the caller only reads: it shares the writer's session when a
        command holds one, and otherwise gets a read-only session of its own, so a read
        never locks, repairs or otherwise changes the store."""
        if not create:
            async with self._lock:
                held = self._open.get(name)
                if held is not None:
                    held.users += 1
            if held is None:
                reader = await self.repository.open_session(name, read_only=True)
                try:
                    yield reader
                finally:
                    await asyncio.shield(reader.close())
                return
            try:
                yield held.session
            finally:
                await asyncio.shield(self._release(name, held))
            return
        async with self._lock:
            held = self._open.get(name)
            if held is None:
                session = await self.repository.open_session(name, create=create)
                held = self._open[name] = _Held(session)
            held.users += 1
        try:
            yield held.session
        finally:
            # Shielded: a holder cancelled while leaving must still hand the session
            # back, or it would stay open (and locked) for good.
            await asyncio.shield(self._release(name, held))

    async def _release(self, name: str, held: _Held) -> None:
        async with self._lock:
            held.users -= 1
            if held.users == 0 and self._open.get(name) is held:
                del self._open[name]
                await held.session.close()

    @property
    def open_sessions(self) -> list[str]:
        """Names of the sessions held open right now."""
        return sorted(self._open)


_POOLS: weakref.WeakKeyDictionary[Repository, SessionPool] = weakref.WeakKeyDictionary()


def session_pool(repository: Repository | SessionPool) -> SessionPool:
    """The one pool of ``repository`` (the same object for every caller), so an app and
    a runner given the same repository share its open sessions."""
    if isinstance(repository, SessionPool):
        return repository
    pool = _POOLS.get(repository)
    if pool is None:
        pool = _POOLS[repository] = SessionPool(repository)
    return pool
