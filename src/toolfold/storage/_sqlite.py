"""The SQLite backend: many sessions in one database file (the CLI's embedded default).

Every sqlite3 call runs on one dedicated worker thread per repository
(:class:`~toolfold.storage._worker.WorkerThread`), so the event loop never blocks on a
disk flush; the thread also serialises all access to the one connection. Transactions
are ``BEGIN IMMEDIATE`` (the write lock is taken up front, so two processes cannot both
read ``next_seq`` and then collide), the database is in WAL mode, and retirement is a
scoped ``DELETE`` inside the same transaction as the sibling session writes.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ._addresses import EphemeralScope, ListAddress, Scope, ValueAddress
from ._base import Session
from ._base_repository import Repository
from ._changes import CHANGE_POLL_INTERVAL, ChangeWaiters
from ._errors import (
    ClosedError,
    SessionNotFoundError,
)
from ._records import FsyncPolicy, Order, decode_json
from ._sql import (
    TABLES,
    count_entries_query,
    entries_by_key_query,
    payload,
    read_entries_query,
    scope_column,
)
from ._sqlite_sync import (
    SqliteFile,
    commit_writes,
    create_session,
    get_value_text,
    open_session,
)
from ._worker import WorkerThread
from ._writes import JSON, Write

if TYPE_CHECKING:
    from ._entries import Entry, ListElement

__all__ = ["SqliteRepository", "SqliteSession"]

T = TypeVar("T")


class SqliteRepository(Repository):
    """Sessions stored in one SQLite database file (``sqlite:PATH``).

    The file (and its directory) is created on first use. The policy maps to ``PRAGMA
    synchronous`` per transaction, ``fsync.main`` for the session scope and
    ``fsync.side`` for ephemeral scopes: ``"commit"`` → ``FULL`` (each commit survives
    power loss), ``"none"`` → ``NORMAL`` (WAL: survives a process crash; the last
    commits may be lost on power loss, the file stays consistent, and a later ``FULL``
    commit makes every commit before it durable too).
    """

    def __init__(
        self, path: str | Path, *, fsync: FsyncPolicy | None = None, read_only: bool = False
    ) -> None:
        super().__init__(read_only=read_only)
        #: The file and its connection (touched only on the worker thread).
        self.file = SqliteFile(
            path, fsync=fsync if fsync is not None else FsyncPolicy(), read_only=read_only
        )
        self.path = self.file.path
        self.location = self.file.location
        self.fsync = self.file.fsync
        self._worker = WorkerThread("toolfold-sqlite")

    # -- the worker ----------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` on the worker thread, translating sqlite3 errors."""
        return await self._submit(fn, *args)

    def _submit(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """``fn(conn, *args)`` sent to the worker thread: the future of its result."""
        try:
            return self._worker.submit(functools.partial(self.file.call, fn, *args))
        except RuntimeError as exc:
            if self._worker.closed:
                raise ClosedError(f"repository {self.location} is closed") from exc
            raise

    # -- repository hooks -----------------------------------------------------------

    async def _create_session(self, name: str) -> Session:
        await self._run(create_session, self.location, name)
        return SqliteSession(self, name, 1)

    async def _open_session(self, name: str, *, create: bool) -> Session:
        return SqliteSession(self, name, await self._run(open_session, self.location, name, create))

    async def _list_sessions(self) -> list[str]:
        def list_(conn: sqlite3.Connection) -> list[str]:
            return [r[0] for r in conn.execute("SELECT name FROM sessions")]

        return await self._run(list_)

    async def _delete_session(self, name: str) -> None:
        def delete(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            try:
                cur = conn.execute("DELETE FROM sessions WHERE name = ?", (name,))
                if cur.rowcount == 0:
                    raise SessionNotFoundError(f"no session {name!r} in {self.location} to delete")
                for table in TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE session = ?", (name,))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

        await self._run(delete)

    # -- the change signal ------------------------------------------------------------

    async def _high_water(self, name: str) -> int:
        def high(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT next_seq FROM sessions WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise SessionNotFoundError(f"no session {name!r} in {self.location} to follow")
            return int(row[0]) - 1

        return await self._run(high)

    async def _watch(self, waiters: ChangeWaiters, ready: Callable[[], None]) -> None:
        # data_version moves when another connection (process) commits to the file; it
        # costs no I/O beyond the WAL index in shared memory. Only when it moved are the
        # waited sessions' next_seq read. This connection's own commits do not move it:
        # those reach the waiters from the committing session.
        def version(conn: sqlite3.Connection) -> int:
            return int(conn.execute("PRAGMA data_version").fetchone()[0])

        def highs(conn: sqlite3.Connection, names: list[str]) -> list[tuple[str, int]]:
            marks = ",".join("?" * len(names))
            rows = conn.execute(
                f"SELECT name, next_seq FROM sessions WHERE name IN ({marks})", names
            )
            return [(str(n), int(seq) - 1) for n, seq in rows]

        seen = await self._run(version)
        ready()
        while True:
            await waiters.wait_nonempty()
            await asyncio.sleep(CHANGE_POLL_INTERVAL)
            now = await self._run(version)
            if now == seen:
                continue
            seen = now
            names = waiters.names
            for i in range(0, len(names), 500):  # SQLite's bound-parameter limit
                for name, high in await self._run(highs, names[i : i + 500]):
                    waiters.publish(name, high)

    async def _close(self) -> None:
        try:
            if self.file.conn is not None:
                await self._run(_close_file, self.file)
        finally:
            self._worker.shutdown()


class SqliteSession(Session):
    """One session of a :class:`SqliteRepository`."""

    _expects_in_transaction = True

    def __init__(self, repo: SqliteRepository, name: str, next_seq: int) -> None:
        super().__init__(name, next_seq)
        self._repo = repo

    def _commit_writes(
        self, writes: tuple[Write, ...], scope: Scope
    ) -> asyncio.Future[tuple[int, ...]]:
        # The worker thread's future, awaited as it is (no task in between); the seq
        # floor moves on in its done callback, which runs before the caller resumes.
        payloads = [payload(w) for w in writes]
        name = self._name
        floor = self._next_seq
        expects = self._expect

        def advance(done: asyncio.Future[tuple[int, ...]]) -> None:
            if done.cancelled() or done.exception() is not None:
                # Never hand these seqs out again, whatever happened (gaps are allowed).
                self._next_seq = floor + len(writes)
            else:
                self._next_seq = done.result()[-1] + 1

        try:
            pending = self._repo._submit(
                commit_writes, self._repo.file, name, writes, payloads, floor, expects, scope
            )
        except BaseException:
            self._next_seq = floor + len(writes)
            raise
        pending.add_done_callback(advance)
        return pending

    async def _get_value(self, address: ValueAddress[Any]) -> JSON | None:
        name = self._name

        text = await self._repo._run(get_value_text, name, address)
        return None if text is None else self._decode(text, "kv_values")

    async def _scan_values(
        self, namespace: str, key_prefix: str, scope: Scope
    ) -> list[tuple[str, JSON]]:
        name = self._name

        def scan(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            return [
                (str(k), str(v))
                for k, v in conn.execute(
                    "SELECT key, value FROM kv_values WHERE session = ? AND scope_id = ? "
                    "AND namespace = ? AND substr(key, 1, ?) = ? ORDER BY key",
                    (name, scope_column(scope), namespace, len(key_prefix), key_prefix),
                )
            ]

        return [(k, self._decode(v, "kv_values")) for k, v in await self._repo._run(scan)]

    async def _read_list(
        self,
        address: ListAddress[Any],
        cursor: int | None,
        order: Order,
        limit: int | None,
        stop_at_tag: str | None,
    ) -> list[ListElement]:
        name = self._name
        if order == "asc":
            cond, direction = "seq > ?", "ASC"
            bound = -(2**63) if cursor is None else cursor
        else:
            cond, direction = "seq < ?", "DESC"
            bound = 2**63 - 1 if cursor is None else cursor

        def read(conn: sqlite3.Connection) -> list[tuple[int, str, str | None]]:
            rows = conn.execute(
                f"SELECT seq, value, tag FROM list_elements WHERE session = ? AND scope_id = ? "
                f"AND namespace = ? AND key = ? AND {cond} ORDER BY seq {direction} LIMIT ?",
                (
                    name,
                    scope_column(address.scope),
                    address.namespace,
                    address.key,
                    bound,
                    -1 if limit is None else limit,
                ),
            )
            out: list[tuple[int, str, str | None]] = []
            # The cursor is lazy: stopping at the tag stops reading the table.
            for seq, value, tag in rows:
                out.append((seq, value, tag))
                if stop_at_tag is not None and tag == stop_at_tag:
                    break
            return out

        rows = await self._repo._run(read)
        from ._entries import ListElement  # defined with the first read: a run never reads

        return [
            ListElement(seq, self._decode(v, "list_elements", seq), tag) for seq, v, tag in rows
        ]

    async def _read_entries(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]:
        sql, params = read_entries_query(
            self._name, cursor, limit, order, keyed, offset, summaries, postgres=False
        )
        return await self._entries(sql, params)

    async def _entries_by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]:
        return await self._entries(
            *entries_by_key_query(self._name, key, prefix, limit, postgres=False)
        )

    async def _count_entries(self, keyed: bool) -> int:
        sql, params = count_entries_query(self._name, keyed, postgres=False)

        def count(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, params).fetchone()[0])

        return await self._repo._run(count)

    async def _entries(self, sql: str, params: tuple[Any, ...]) -> list[Entry]:
        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            return list(conn.execute(sql, params))

        rows = await self._repo._run(read)
        from ._entries import Entry  # defined with the first read: a run never reads

        return [self._entry(Entry, row) for row in rows]

    def _entry(self, entry: type[Entry], row: tuple[Any, ...]) -> Entry:
        seq, key, summary = int(row[0]), row[1], row[2]
        return entry(
            seq,
            self._decode(row[3], "entries", seq) if len(row) > 3 else None,
            key,
            None if summary is None else self._decode(summary, "entries", seq),
        )

    async def _live_scopes(self) -> list[EphemeralScope]:
        name = self._name

        def live(conn: sqlite3.Connection) -> list[str]:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT scope_id FROM kv_values WHERE session = ? AND scope_id != '' "
                    "UNION SELECT scope_id FROM list_elements WHERE session = ? "
                    "AND scope_id != ''",
                    (name, name),
                )
            ]

        return [EphemeralScope(sid) for sid in await self._repo._run(live)]

    async def _close(self) -> None:
        pass

    def _decode(self, text: str, table: str, seq: int | None = None) -> JSON:
        return decode_json(
            text,
            path=f"{self._repo.path} table {table}",
            record=f"session {self._name!r} seq {seq}",
        )


def _close_file(_conn: sqlite3.Connection, file: SqliteFile) -> None:
    file.close()
