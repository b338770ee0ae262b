"""The SQLite store's synchronous core: the file's one connection, opened under our rules,
and a session's open, commit and value read as plain functions of it.

``SqliteRepository`` runs these on its worker thread, so the event loop never blocks on a
flush. A process with one call to record and nothing else to wait for (``toolfold run``'s
direct path, docs/architecture.md) calls them in line through :class:`SyncSqliteSession`:
the same statements, checks, errors and transactions, without asyncio or a thread.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from toolfold._fsperm import UnsafePathError, create_private_file, make_private_dirs

from . import _sqlite_file
from ._addresses import SESSION, Scope, ValueAddress
from ._commit_checks import check_expect, check_expects, checked_across, checked_batch
from ._errors import (
    BackendError,
    ClosedError,
    CorruptStoreError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from ._records import CommitResult, FsyncPolicy, decode_json
from ._sql import ENTRY_INDEXES, SCHEMA_VERSION, payload, scope_column
from ._sqlite_file import (
    BUSY_TIMEOUT_MS,
    PAGE_SIZE,
    SCHEMA,
    SQLITE_CORRUPT,
    SQLITE_FULL,
    SQLITE_IOERR,
    SQLITE_NOTADB,
    gives_pages_back,
    no_space,
    now_iso,
    tidy_after_retirement,
)
from ._writes import JSON, EphemeralWrite, Expect, RetireScope, SessionWrite, Write

__all__ = [
    "SqliteFile",
    "SyncSqliteSession",
    "commit_writes",
    "create_session",
    "get_value_text",
    "open_session",
]

T = TypeVar("T")


class SqliteFile:
    """One SQLite store file and its one connection (opened on first use), touched by one
    thread only. The policy maps to ``PRAGMA synchronous`` per transaction, ``fsync.main``
    for the session scope and ``fsync.side`` for ephemeral scopes (see
    ``SqliteRepository``)."""

    def __init__(self, path: str | Path, *, fsync: FsyncPolicy, read_only: bool) -> None:
        self.path = Path(path)
        self.location = f"sqlite:{self.path}"
        self.fsync = fsync
        self.read_only = read_only
        self.conn: sqlite3.Connection | None = None
        self._sync_level = ""  # the connection's PRAGMA synchronous
        #: Whether the file hands freed pages back (asked once, when a writer opens it).
        self.gives_pages_back = False

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(conn, *args)`` on the connection, sqlite3 errors translated to ours."""
        conn = self.connect()
        try:
            return fn(conn, *args)
        except (sqlite3.Error, UnicodeDecodeError) as exc:
            raise self.translate(exc) from exc

    def close(self) -> None:
        """Close the connection (if it was opened)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.close()

    def translate(self, exc: sqlite3.Error | UnicodeDecodeError) -> StorageError:
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

    def connect(self) -> sqlite3.Connection:
        """The connection, opened (and the file created, for a writer) on first use."""
        if self.conn is not None:
            return self.conn
        conn = self._open_reader_connection() if self.read_only else self._open_writer_connection()
        self.conn = conn
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
            self.gives_pages_back = gives_pages_back(conn)
        except (sqlite3.Error, UnicodeDecodeError, StorageError) as exc:
            conn.close()
            if isinstance(exc, StorageError):
                raise
            raise self.translate(exc) from exc
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
            raise self.translate(exc) from exc
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


def create_session(conn: sqlite3.Connection, location: str, name: str) -> None:
    """Create session ``name`` (:class:`SessionExistsError` if it exists)."""
    try:
        conn.execute(
            "INSERT INTO sessions (name, next_seq, created_at) VALUES (?, 1, ?)",
            (name, now_iso()),
        )
    except sqlite3.IntegrityError:
        raise SessionExistsError(f"session {name!r} already exists in {location}") from None


def open_session(conn: sqlite3.Connection, location: str, name: str, create: bool) -> int:
    """Session ``name``'s next seq (created first if ``create``; else
    :class:`SessionNotFoundError` when it does not exist)."""
    if create:
        conn.execute(
            "INSERT INTO sessions (name, next_seq, created_at) VALUES (?, 1, ?) "
            "ON CONFLICT (name) DO NOTHING",
            (name, now_iso()),
        )
    row = conn.execute("SELECT next_seq FROM sessions WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise SessionNotFoundError(
            f"no session {name!r} in {location}; create it first "
            "(create_session, or open_session(..., create=True))"
        )
    return int(row[0])


def commit_writes(
    conn: sqlite3.Connection,
    file: SqliteFile,
    name: str,
    writes: tuple[Write, ...],
    payloads: Sequence[str | None],
    floor: int,
    expects: tuple[Expect, ...],
    scope: Scope,
) -> tuple[int, ...]:
    """ONE ``BEGIN IMMEDIATE`` transaction of session ``name``: the preconditions
    checked, then ``writes`` (their :func:`payload` texts given) applied with fresh seqs
    from the stored next seq (never below ``floor``, the session's own); returns the
    seqs. After a retirement, the file is tidied (outside the transaction)."""
    file.set_sync(conn, scope)
    conn.execute("BEGIN IMMEDIATE")
    try:
        first = _claim_seqs(conn, file, name, floor, len(writes))
        # Under BEGIN IMMEDIATE no other process writes until we commit, so the
        # preconditions still hold when the writes land.
        for e in expects:
            check_expect(name, e, get_value_text(conn, name, e.address))
        seqs = tuple(range(first, first + len(writes)))
        cur = conn.cursor()
        for w, seq, data in zip(writes, seqs, payloads, strict=True):
            _sqlite_file.apply_write(cur, name, w, seq, data)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    if file.gives_pages_back and any(isinstance(w, RetireScope) for w in writes):
        tidy_after_retirement(conn)
    return seqs


#: SQLite 3.35 and later read and move a session's next seq in one statement.
CLAIM_IN_ONE_STATEMENT = sqlite3.sqlite_version_info >= (3, 35, 0)


def _claim_seqs(
    conn: sqlite3.Connection, file: SqliteFile, name: str, floor: int, count: int
) -> int:
    """Inside the open transaction: move session ``name``'s stored next seq past
    ``count`` fresh seqs and return the first. The database is the authority (another
    process may share the file); ``floor``, the session's own, keeps seqs burnt by a
    failed commit from coming back. Undone with the transaction if it rolls back."""
    if CLAIM_IN_ONE_STATEMENT:
        rows = conn.execute(
            "UPDATE sessions SET next_seq = max(next_seq, ?) + ? WHERE name = ? RETURNING next_seq",
            (floor, count, name),
        ).fetchall()
        first = int(rows[0][0]) - count if rows else None
    else:
        row = conn.execute("SELECT next_seq FROM sessions WHERE name = ?", (name,)).fetchone()
        first = max(int(row[0]), floor) if row is not None else None
        if first is not None:
            conn.execute("UPDATE sessions SET next_seq = ? WHERE name = ?", (first + count, name))
    if first is None:
        raise SessionNotFoundError(
            f"session {name!r} no longer exists in {file.location} (deleted by another process?)"
        )
    return first


def get_value_text(conn: sqlite3.Connection, name: str, address: ValueAddress[Any]) -> str | None:
    """The stored JSON text at ``address`` of session ``name``, or ``None``."""
    row = conn.execute(
        "SELECT value FROM kv_values WHERE session = ? AND scope_id = ? "
        "AND namespace = ? AND key = ?",
        (name, scope_column(address.scope), address.namespace, address.key),
    ).fetchone()
    return None if row is None else str(row[0])


class SyncSqliteSession:
    """One session of a SQLite store, used in line by a single-threaded process with no
    event loop: :meth:`commit` and :meth:`commit_across` check, number and apply their
    writes exactly as ``SqliteSession`` does (the same functions), one at a time in call
    order (no session line is needed: nothing runs beside the caller)."""

    def __init__(self, file: SqliteFile, name: str, next_seq: int) -> None:
        self.file = file
        self.name = name
        self.next_seq = next_seq
        self._closed = False

    @classmethod
    def open(cls, file: SqliteFile, name: str, *, create: bool = False) -> SyncSqliteSession:
        """Open session ``name`` of ``file`` (created first when ``create``)."""
        return cls(file, name, file.call(open_session, file.location, name, create))

    def commit(
        self,
        writes: Sequence[Write] | Callable[[], Sequence[Write]],
        *,
        expect: Sequence[Expect] = (),
    ) -> CommitResult:
        """``Session.commit``, in line (a callable is evaluated right before the writes)."""
        expects = check_expects(self.name, expect)
        self._check_open()
        checked = checked_batch(self.name, writes() if callable(writes) else writes)
        if checked is None:
            return CommitResult(())
        return self._commit(*checked, expects)

    def commit_across(
        self,
        session_writes: Sequence[SessionWrite],
        scope_writes: Sequence[EphemeralWrite],
        *,
        expect: Sequence[Expect] = (),
    ) -> CommitResult:
        """``Session.commit_across``, in line: ONE transaction over both parts."""
        main, side = tuple(session_writes), tuple(scope_writes)
        if not side:
            return self.commit(list(main), expect=expect)
        if not main:
            return self.commit(list(side), expect=expect)
        expects = check_expects(self.name, expect)
        self._check_open()
        return self._commit(checked_across(self.name, main, side), SESSION, expects)

    def _commit(
        self, ws: tuple[Write, ...], scope: Scope, expects: tuple[Expect, ...]
    ) -> CommitResult:
        floor = self.next_seq
        payloads = [payload(w) for w in ws]
        try:
            seqs = self.file.call(
                commit_writes, self.file, self.name, ws, payloads, floor, expects, scope
            )
        except BaseException:
            # Never hand these seqs out again, whatever happened (gaps are allowed).
            self.next_seq = floor + len(ws)
            raise
        self.next_seq = seqs[-1] + 1
        return CommitResult(seqs)

    def get_value(self, address: ValueAddress[Any]) -> JSON | None:
        """The value at ``address``, or ``None``."""
        self._check_open()
        text = self.file.call(get_value_text, self.name, address)
        if text is None:
            return None
        return decode_json(
            text, path=f"{self.file.path} table kv_values", record=f"session {self.name!r}"
        )

    def close(self) -> None:
        """Close the session (its file's connection stays with the file)."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"session {self.name!r} is closed; open it again from its store")
