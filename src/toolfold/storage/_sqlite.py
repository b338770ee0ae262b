"""The SQLite backend: many sessions in one database file (the CLI's embedded default).

Every sqlite3 call runs on one dedicated worker thread per repository, so the event
loop never blocks on a disk flush; the thread also serialises all access to the one
connection. Transactions are ``BEGIN IMMEDIATE`` (the write lock is taken up front, so
two processes cannot both read ``next_seq`` and then collide), the database is in WAL
mode, and retirement is a scoped ``DELETE`` inside the same transaction as the sibling
session writes.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from toolfold._fsperm import UnsafePathError, create_private_file, make_private_dirs

from . import _sqlite_file
from ._addresses import SESSION, EphemeralScope, ListAddress, Scope, ValueAddress
from ._base import Session, check_expect
from ._base_repository import Repository
from ._changes import CHANGE_POLL_INTERVAL, ChangeWaiters
from ._errors import (
    BackendError,
    ClosedError,
    CorruptStoreError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from ._records import Entry, FsyncPolicy, ListElement, Order, decode_json
from ._sql import (
    ENTRY_INDEXES,
    SCHEMA_VERSION,
    TABLES,
    count_entries_query,
    entries_by_key_query,
    payload,
    read_entries_query,
    scope_column,
)
from ._sqlite_file import (
    BUSY_TIMEOUT_MS,
    PAGE_SIZE,
    SCHEMA,
    SQLITE_CORRUPT,
    SQLITE_FULL,
    SQLITE_IOERR,
    SQLITE_NOTADB,
    no_space,
    now_iso,
    tidy_after_retirement,
)
from ._writes import JSON, RetireScope, Write

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
        self.path = Path(path)
        self.location = f"sqlite:{self.path}"
        self.fsync = fsync if fsync is not None else FsyncPolicy()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolfold-sqlite")
        self._conn: sqlite3.Connection | None = None  # touched only on the worker thread
        self._sync_level = ""  # the connection's PRAGMA synchronous (worker thread only)
        self._shut_down = False

    # -- the worker ----------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(conn, *args)`` on the worker thread, translating sqlite3 errors."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor, functools.partial(self._call, fn, *args)
            )
        except RuntimeError as exc:
            if self._shut_down:
                raise ClosedError(f"repository {self.location} is closed") from exc
            raise

    def _call(self, fn: Callable[..., T], *args: Any) -> T:
        conn = self._connect()
        try:
            return fn(conn, *args)
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.Error | UnicodeDecodeError) -> StorageError:
        """Our error for an sqlite3 one. Only SQLite's own verdict (SQLITE_CORRUPT,
        SQLITE_NOTADB) or text it cannot decode makes a store "corrupt": a full disk or an
        I/O error says nothing about the file, and calling a healthy store corrupt would
        send its user to move it aside."""
        if isinstance(exc, UnicodeDecodeError):
            # sqlite3 decodes names and messages as UTF-8: a damaged byte in the schema
            # surfaces here, not as an sqlite3 error.
            return self._corrupt(f"text in the file is not valid UTF-8: {exc}")
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code in (SQLITE_CORRUPT, SQLITE_NOTADB):
            return self._corrupt(str(exc))
        if code == SQLITE_FULL or (code == SQLITE_IOERR and no_space(self.path.parent)):
            # With no byte free SQLite often cannot even map its -shm file: it reports an
            # I/O error for what is a full disk.
            return BackendError(
                f"SQLite cannot write {self.path}: the disk is full ({exc}); the store is "
                "unchanged since the last commit: free some space and retry"
            )
        return BackendError(f"SQLite failed on {self.path}: {exc}")

    def _corrupt(self, why: object) -> CorruptStoreError:
        return CorruptStoreError(
            f"{self.path} is not a usable toolfold SQLite store ({why}); move it aside "
            "or point the store URL at another file",
            path=str(self.path),
        )

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        conn = self._open_reader_connection() if self.read_only else self._open_writer_connection()
        self._conn = conn
        return conn

    def _open_writer_connection(self) -> sqlite3.Connection:
        self._claim_files()
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open SQLite file {self.path}: {exc}") from exc
        try:
            if conn.execute("PRAGMA page_count").fetchone()[0] == 0:
                # A new file: these only take effect before the first table exists, and
                # setting them on an existing file would still write to it.
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            # Checkpoint the WAL at the same 4 MB as SQLite's default does with 4 KB
            # pages: a checkpoint copies each page once however often it was rewritten,
            # so a smaller WAL would copy more.
            conn.execute(f"PRAGMA wal_autocheckpoint = {4 * 1024 * 1024 // PAGE_SIZE}")
            conn.execute(f"PRAGMA synchronous = {self._synchronous(SESSION)}")
            self._sync_level = self._synchronous(SESSION)
            self._check_tables(conn, empty_ok=True)
            conn.execute("BEGIN IMMEDIATE")
            for stmt in SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            columns = {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
            for column in ("key", "summary"):
                if column not in columns:  # a store written before entries had keys
                    conn.execute(f"ALTER TABLE entries ADD COLUMN {column} TEXT")
            for stmt in ENTRY_INDEXES:
                conn.execute(stmt)
            row = conn.execute("SELECT value FROM toolfold_meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO toolfold_meta (key, value) VALUES ('schema', ?)",
                    (SCHEMA_VERSION,),
                )
            else:
                self._check_version(row[0])
            conn.execute("COMMIT")
        except (sqlite3.Error, UnicodeDecodeError, StorageError) as exc:
            conn.close()
            if isinstance(exc, StorageError):
                raise
            raise self._translate(exc) from exc
        return conn

    def _synchronous(self, scope: Scope) -> str:
        """``PRAGMA synchronous`` for a commit in ``scope``: ``fsync.main`` governs the
        session scope, ``fsync.side`` the ephemeral ones (in WAL mode a synced commit
        syncs every commit before it too: what survives is always a prefix)."""
        policy = self.fsync.main if scope == SESSION else self.fsync.side
        return "FULL" if policy == "commit" else "NORMAL"

    def set_sync(self, conn: sqlite3.Connection, scope: Scope) -> None:
        """Switch the connection to ``scope``'s sync level (outside a transaction)."""
        level = self._synchronous(scope)
        if level != self._sync_level:
            conn.execute(f"PRAGMA synchronous = {level}")
            self._sync_level = level

    def _claim_files(self) -> None:
        """Make the database and its -wal and -shm files exist under toolfold._fsperm's
        rule before SQLite opens them by name (and would follow a link, or adopt a file
        another user planted and can read). They hold commands and their output: 0600.
        Creating -wal and -shm ahead leaves no name for anyone to plant in a shared
        (sticky) directory; SQLite treats empty ones as absent. A -journal is only judged:
        an empty one left behind would be harmless, but it is not ours to add."""
        try:
            if not os.path.lexists(self.path.parent):
                make_private_dirs(self.path.parent)
            create_private_file(self.path)  # judges the directories above it too
            for suffix in ("-wal", "-shm", "-journal"):
                side = self.path.with_name(self.path.name + suffix)
                if suffix != "-journal" or os.path.lexists(side):
                    create_private_file(side)
        except UnsafePathError as exc:
            raise BackendError(str(exc)) from exc
        except OSError as exc:
            raise BackendError(f"cannot create {self.path}: {exc}") from exc

    def _open_reader_connection(self) -> sqlite3.Connection:
        # mode=ro: nothing is created or written (no schema, no journal mode change).
        if not self.path.is_file():
            raise BackendError(f"no SQLite store at {self.path}")
        try:
            conn = sqlite3.connect(
                f"{self.path.absolute().as_uri()}?mode=ro",
                uri=True,
                isolation_level=None,
                check_same_thread=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
            )
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open SQLite file {self.path}: {exc}") from exc
        try:
            self._check_tables(conn, empty_ok=False)
            row = conn.execute("SELECT value FROM toolfold_meta WHERE key = 'schema'").fetchone()
            self._check_version(None if row is None else row[0])
            columns = {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
            if "key" not in columns:
                # A store from before entries had keys, which a reader must not upgrade:
                # a temporary view (temp shadows main for unqualified names) shows its
                # entries as unkeyed, so every entry query works unchanged.
                conn.execute(
                    "CREATE TEMP VIEW entries AS SELECT session, seq, NULL AS key, "
                    "NULL AS summary, value FROM main.entries"
                )
        except (sqlite3.Error, UnicodeDecodeError, StorageError) as exc:
            conn.close()
            if isinstance(exc, StorageError):
                raise
            raise self._translate(exc) from exc
        return conn

    def _check_tables(self, conn: sqlite3.Connection, *, empty_ok: bool) -> None:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if (tables or not empty_ok) and "toolfold_meta" not in tables:
            raise CorruptStoreError(
                f"{self.path} is an SQLite database but not a toolfold store "
                f"(tables: {', '.join(sorted(tables)) or 'none'}); use another file",
                path=str(self.path),
            )

    def _check_version(self, found: object) -> None:
        if found != SCHEMA_VERSION:
            raise CorruptStoreError(
                f"{self.path} holds schema {found!r}, this toolfold reads "
                f"{SCHEMA_VERSION!r}; use a matching toolfold version",
                path=str(self.path),
            )

    # -- repository hooks -----------------------------------------------------------

    async def _create_session(self, name: str) -> Session:
        def create(conn: sqlite3.Connection) -> None:
            try:
                conn.execute(
                    "INSERT INTO sessions (name, next_seq, created_at) VALUES (?, 1, ?)",
                    (name, now_iso()),
                )
            except sqlite3.IntegrityError:
                raise SessionExistsError(
                    f"session {name!r} already exists in {self.location}"
                ) from None

        await self._run(create)
        return SqliteSession(self, name, 1)

    async def _open_session(self, name: str, *, create: bool) -> Session:
        def open_(conn: sqlite3.Connection) -> int:
            if create:
                conn.execute(
                    "INSERT INTO sessions (name, next_seq, created_at) VALUES (?, 1, ?) "
                    "ON CONFLICT (name) DO NOTHING",
                    (name, now_iso()),
                )
            row = conn.execute("SELECT next_seq FROM sessions WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise SessionNotFoundError(
                    f"no session {name!r} in {self.location}; create it first "
                    "(create_session, or open_session(..., create=True))"
                )
            return int(row[0])

        return SqliteSession(self, name, await self._run(open_))

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
        def close(conn: sqlite3.Connection) -> None:
            conn.close()

        try:
            if self._conn is not None:
                await self._run(close)
                self._conn = None
        finally:
            self._shut_down = True
            self._executor.shutdown(wait=False)


class SqliteSession(Session):
    """One session of a :class:`SqliteRepository`."""

    _expects_in_transaction = True

    def __init__(self, repo: SqliteRepository, name: str, next_seq: int) -> None:
        super().__init__(name, next_seq)
        self._repo = repo

    async def _commit_writes(self, writes: tuple[Write, ...], scope: Scope) -> tuple[int, ...]:
        payloads = [payload(w) for w in writes]
        name = self._name
        floor = self._next_seq
        expects = self._expect

        def commit(conn: sqlite3.Connection) -> tuple[int, ...]:
            self._repo.set_sync(conn, scope)
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT next_seq FROM sessions WHERE name = ?", (name,)
                ).fetchone()
                if row is None:
                    raise SessionNotFoundError(
                        f"session {name!r} no longer exists in {self._repo.location} "
                        "(deleted by another process?)"
                    )
                # Under BEGIN IMMEDIATE no other process writes until we commit, so the
                # preconditions still hold when the writes land.
                for e in expects:
                    found = conn.execute(
                        "SELECT value FROM kv_values WHERE session = ? AND scope_id = ? "
                        "AND namespace = ? AND key = ?",
                        (name, scope_column(e.address.scope), e.address.namespace, e.address.key),
                    ).fetchone()
                    check_expect(name, e, None if found is None else found[0])
                # The database is the authority (another process may share the file);
                # our own floor keeps seqs burnt by a failed commit from coming back.
                first = max(int(row[0]), floor)
                seqs = tuple(range(first, first + len(writes)))
                cur = conn.cursor()
                for w, seq, data in zip(writes, seqs, payloads, strict=True):
                    _sqlite_file.apply_write(cur, name, w, seq, data)
                cur.execute("UPDATE sessions SET next_seq = ? WHERE name = ?", (seqs[-1] + 1, name))
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            if any(isinstance(w, RetireScope) for w in writes):
                tidy_after_retirement(conn)
            return seqs

        try:
            seqs = await self._repo._run(commit)
        except BaseException:
            # Never hand these seqs out again, whatever happened (gaps are allowed).
            self._next_seq = floor + len(writes)
            raise
        self._next_seq = seqs[-1] + 1
        return seqs

    async def _get_value(self, address: ValueAddress[Any]) -> JSON | None:
        name = self._name

        def get(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT value FROM kv_values WHERE session = ? AND scope_id = ? "
                "AND namespace = ? AND key = ?",
                (name, scope_column(address.scope), address.namespace, address.key),
            ).fetchone()
            return None if row is None else str(row[0])

        text = await self._repo._run(get)
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

        return [
            ListElement(seq, self._decode(v, "list_elements", seq), tag)
            for seq, v, tag in await self._repo._run(read)
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

        return [self._entry(row) for row in await self._repo._run(read)]

    def _entry(self, row: tuple[Any, ...]) -> Entry:
        seq, key, summary = int(row[0]), row[1], row[2]
        return Entry(
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
