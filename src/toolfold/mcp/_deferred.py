"""``DeferredSession``: a storage session that is created in its store by its first commit.

``toolfold mcp proxy`` records the calls of a new session; a client that only connects and
lists tools (an inspector, a health check) makes none, and must leave no session behind,
even when the proxy is killed before it could clean up. So the session is not created at
connect: until its first commit it reads as the empty session it would be, and that
commit creates it (``open_session(create=True)``) and goes on to the real session, as
does everything after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Literal

from toolfold.storage import (
    JSON,
    SESSION,
    CommitResult,
    Entry,
    EphemeralScope,
    EphemeralWrite,
    Expect,
    ListAddress,
    ListElement,
    Repository,
    Scope,
    Session,
    SessionWrite,
    ValueAddress,
    Write,
)

Order = Literal["asc", "desc"]


class DeferredSession(Session):
    """Session ``name`` of ``repository``, created there by its first commit (see the
    module doc). Reads before it check their arguments as any session's do, and find
    nothing."""

    def __init__(self, repository: Repository, name: str) -> None:
        super().__init__(name, 1)
        self._repository = repository
        self._inner: Session | None = None
        self._opening = asyncio.Lock()

    @property
    def created(self) -> bool:
        """Whether the first commit created the session in the store."""
        return self._inner is not None

    @property
    def next_seq(self) -> int:
        """The seq the next write would get at the earliest."""
        return self._inner.next_seq if self._inner is not None else super().next_seq

    async def _open(self) -> Session:
        async with self._opening:
            self._check_open()
            if self._inner is None:
                self._inner = await self._repository.open_session(self.name, create=True)
            return self._inner

    async def commit(
        self,
        writes: Sequence[Write] | Callable[[], Sequence[Write]],
        *,
        expect: Sequence[Expect] = (),
    ) -> CommitResult:
        """Commit to the session, creating it in the store first if this is the first."""
        inner = await self._open()
        return await inner.commit(writes, expect=expect)

    async def commit_across(
        self,
        session_writes: Sequence[SessionWrite],
        scope_writes: Sequence[EphemeralWrite],
        *,
        expect: Sequence[Expect] = (),
    ) -> CommitResult:
        """``commit_across`` on the session, creating it in the store first if needed."""
        inner = await self._open()
        return await inner.commit_across(session_writes, scope_writes, expect=expect)

    # -- reads: the real session's once it exists; empty (arguments checked) before --------

    async def get_value(self, address: ValueAddress[Any]) -> JSON | None:
        if self._inner is not None:
            return await self._inner.get_value(address)
        return await super().get_value(address)

    async def scan_values(
        self, namespace: str, key_prefix: str = "", scope: Scope = SESSION
    ) -> list[tuple[str, JSON]]:
        if self._inner is not None:
            return await self._inner.scan_values(namespace, key_prefix, scope)
        return await super().scan_values(namespace, key_prefix, scope)

    async def read_list(
        self,
        address: ListAddress[Any],
        *,
        cursor: int | None = None,
        order: Order = "asc",
        limit: int | None = None,
        stop_at_tag: str | None = None,
    ) -> list[ListElement]:
        if self._inner is not None:
            return await self._inner.read_list(
                address, cursor=cursor, order=order, limit=limit, stop_at_tag=stop_at_tag
            )
        return await super().read_list(
            address, cursor=cursor, order=order, limit=limit, stop_at_tag=stop_at_tag
        )

    async def read_entries(
        self,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        order: Order = "asc",
        keyed: bool = False,
        offset: int = 0,
        summaries: bool = False,
    ) -> list[Entry]:
        if self._inner is not None:
            return await self._inner.read_entries(
                cursor=cursor,
                limit=limit,
                order=order,
                keyed=keyed,
                offset=offset,
                summaries=summaries,
            )
        return await super().read_entries(
            cursor=cursor, limit=limit, order=order, keyed=keyed, offset=offset, summaries=summaries
        )

    async def entries_by_key(
        self, key: str, *, prefix: bool = False, limit: int | None = None
    ) -> list[Entry]:
        if self._inner is not None:
            return await self._inner.entries_by_key(key, prefix=prefix, limit=limit)
        return await super().entries_by_key(key, prefix=prefix, limit=limit)

    async def count_entries(self, *, keyed: bool = False) -> int:
        if self._inner is not None:
            return await self._inner.count_entries(keyed=keyed)
        return await super().count_entries(keyed=keyed)

    async def live_scopes(self) -> list[EphemeralScope]:
        if self._inner is not None:
            return await self._inner.live_scopes()
        return await super().live_scopes()

    async def refresh(self) -> None:
        if self._inner is not None:
            await self._inner.refresh()
        await super().refresh()

    # -- the backend methods, reached only before the first commit --------------------

    async def _commit_writes(self, writes: tuple[Write, ...], scope: Scope) -> tuple[int, ...]:
        raise AssertionError("commit() goes to the created session")  # pragma: no cover

    async def _get_value(self, address: ValueAddress[Any]) -> JSON | None:
        return None

    async def _scan_values(
        self, namespace: str, key_prefix: str, scope: Scope
    ) -> list[tuple[str, JSON]]:
        return []

    async def _read_list(
        self,
        address: ListAddress[Any],
        cursor: int | None,
        order: Order,
        limit: int | None,
        stop_at_tag: str | None,
    ) -> list[ListElement]:
        return []

    async def _read_entries(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]:
        return []

    async def _entries_by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]:
        return []

    async def _count_entries(self, keyed: bool) -> int:
        return 0

    async def _live_scopes(self) -> list[EphemeralScope]:
        return []

    async def _close(self) -> None:
        async with self._opening:
            if self._inner is not None:
                await self._inner.close()


__all__ = ["DeferredSession"]
