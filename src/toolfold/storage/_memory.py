"""The in-memory backend: dicts keyed by (scope, namespace, key), one next_seq.

It is the reference model for the conformance and property tests. Values are kept as
encoded JSON bytes, so a caller mutating what it wrote or read can never change the
store, and every value round-trips exactly as it would through a durable backend.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._addresses import SESSION, EphemeralScope, ListAddress, Scope, ValueAddress
from ._base import Session
from ._base_repository import Repository
from ._entries import Entry, EntryIndex, ListElement
from ._errors import SessionExistsError, SessionNotFoundError
from ._paging import page_sorted
from ._records import Order, StoredElement, encode_json, load_stored
from ._writes import (
    JSON,
    AppendEntry,
    AppendList,
    DeleteList,
    DeleteValue,
    RetireScope,
    SetValue,
    Write,
)

__all__ = ["MemoryRepository", "MemorySession"]

_Key = tuple[Scope, str, str]


class _MemoryData:
    """One session's state; survives close/reopen within its repository."""

    def __init__(self) -> None:
        self.next_seq = 1
        self.values: dict[_Key, bytes] = {}
        self.lists: dict[_Key, list[StoredElement]] = {}
        self.entries = EntryIndex()
        # The keys ever written in each ephemeral scope, so that retiring one touches
        # only its own (a scan of every value would grow with the session's history).
        self.scoped: dict[Scope, set[_Key]] = {}

    def apply(self, writes: tuple[Write, ...], seqs: tuple[int, ...]) -> None:
        # Encode everything first: once we start mutating nothing may fail, which is
        # what makes this transaction atomic.
        encoded = [
            encode_json(w.value)
            if isinstance(w, SetValue)
            else encode_json(w.element)
            if isinstance(w, AppendList)
            else encode_json(w.entry)
            if isinstance(w, AppendEntry)
            else b""
            for w in writes
        ]
        for w, seq, data in zip(writes, seqs, encoded, strict=True):
            if isinstance(w, SetValue):
                self.values[self._track(w.address)] = data
            elif isinstance(w, DeleteValue):
                self.values.pop(_key(w.address), None)
            elif isinstance(w, AppendList):
                self.lists.setdefault(self._track(w.address), []).append(
                    StoredElement(seq, data, w.tag)
                )
            elif isinstance(w, DeleteList):
                self.lists.pop(_key(w.address), None)
            elif isinstance(w, AppendEntry):
                self.entries.append(seq, data, w.key, encode_json(w.summary))
            elif isinstance(w, RetireScope):
                self.retire(w.scope)
        self.next_seq = seqs[-1] + 1

    def retire(self, scope: EphemeralScope) -> None:
        # Everything of the scope has a smaller seq than the retirement (seqs only
        # grow), so "dead" is simply "all of it".
        for k in self.scoped.pop(scope, ()):
            self.values.pop(k, None)
            self.lists.pop(k, None)

    def _track(self, address: ValueAddress[Any] | ListAddress[Any]) -> _Key:
        key = _key(address)
        if address.scope != SESSION:
            self.scoped.setdefault(address.scope, set()).add(key)
        return key


def _key(address: ValueAddress[Any] | ListAddress[Any]) -> _Key:
    return (address.scope, address.namespace, address.key)


class MemorySession(Session):
    """A session held in memory (see :class:`MemoryRepository`)."""

    def __init__(self, name: str, data: _MemoryData) -> None:
        super().__init__(name, data.next_seq)
        self._data = data

    def _commit_writes(
        self, writes: tuple[Write, ...], scope: Scope
    ) -> asyncio.Future[tuple[int, ...]]:
        # Made on the spot: a future already done, which the line takes without a task
        # or a turn of the loop.
        seqs = self._allocate(len(writes))
        self._data.apply(writes, seqs)
        done: asyncio.Future[tuple[int, ...]] = asyncio.get_running_loop().create_future()
        done.set_result(seqs)
        return done

    async def _get_value(self, address: ValueAddress[Any]) -> JSON | None:
        data = self._data.values.get(_key(address))
        return None if data is None else load_stored(data)

    async def _scan_values(
        self, namespace: str, key_prefix: str, scope: Scope
    ) -> list[tuple[str, JSON]]:
        hits = [
            (k[2], data)
            for k, data in self._data.values.items()
            if k[0] == scope and k[1] == namespace and k[2].startswith(key_prefix)
        ]
        hits.sort(key=lambda kv: kv[0])
        return [(key, load_stored(data)) for key, data in hits]

    async def _read_list(
        self,
        address: ListAddress[Any],
        cursor: int | None,
        order: Order,
        limit: int | None,
        stop_at_tag: str | None,
    ) -> list[ListElement]:
        raw = self._data.lists.get(_key(address), [])
        page = page_sorted(raw, cursor=cursor, order=order, limit=limit, stop_at_tag=stop_at_tag)
        return [ListElement(e.seq, load_stored(e.data), e.tag) for e in page]

    async def _read_entries(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]:
        return self._data.entries.read(cursor, limit, order, keyed, offset, summaries)

    async def _entries_by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]:
        return self._data.entries.by_key(key, prefix, limit)

    async def _count_entries(self, keyed: bool) -> int:
        return self._data.entries.count(keyed)

    async def _live_scopes(self) -> list[EphemeralScope]:
        scopes: set[EphemeralScope] = set()
        for k in self._data.values:
            if isinstance(k[0], EphemeralScope):
                scopes.add(k[0])
        for k in self._data.lists:
            if isinstance(k[0], EphemeralScope):
                scopes.add(k[0])
        return list(scopes)

    async def _close(self) -> None:
        pass


class MemoryRepository(Repository):
    """A repository whose sessions live in this process only (``memory:``).

    Sessions survive close/reopen while the repository object lives; nothing touches
    the disk, so the fsync policy does not apply.
    """

    location = "memory:"

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__(read_only=read_only)
        self._sessions: dict[str, _MemoryData] = {}

    async def _create_session(self, name: str) -> Session:
        if name in self._sessions:
            raise SessionExistsError(f"session {name!r} already exists in memory:")
        self._sessions[name] = _MemoryData()
        return MemorySession(name, self._sessions[name])

    async def _open_session(self, name: str, *, create: bool) -> Session:
        data = self._sessions.get(name)
        if data is None:
            if not create:
                raise SessionNotFoundError(
                    f"no session {name!r} in memory:; create it first "
                    "(create_session, or open_session(..., create=True))"
                )
            data = self._sessions[name] = _MemoryData()
        return MemorySession(name, data)

    async def _list_sessions(self) -> list[str]:
        return list(self._sessions)

    # Every writer is in this process: its sessions announce their commits themselves.
    _watches = False

    async def _high_water(self, name: str) -> int:
        data = self._sessions.get(name)
        if data is None:
            raise SessionNotFoundError(f"no session {name!r} in memory: to follow")
        return data.next_seq - 1

    async def _delete_session(self, name: str) -> None:
        if self._sessions.pop(name, None) is None:
            raise SessionNotFoundError(f"no session {name!r} in memory: to delete")

    async def _close(self) -> None:
        pass
