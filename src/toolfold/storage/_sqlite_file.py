"""The SQLite file itself: its schema, page size and lock wait, the error codes that
matter, one write's statements inside a transaction, and tidying after a retirement."""

from __future__ import annotations

import datetime
import os
import sqlite3
from pathlib import Path

from ._sql import SQLITE, write_statements
from ._writes import Write

__all__ = [
    "BUSY_TIMEOUT_MS",
    "PAGE_SIZE",
    "SCHEMA",
    "TIDY_FREE_PAGES",
    "apply_write",
    "gives_pages_back",
    "tidy_after_retirement",
]

#: The tables. ``scope_id`` is ``''`` for the session scope (ephemeral ids are
#: never empty), the raw scope id otherwise. JSON is stored as text.
SCHEMA = """
CREATE TABLE IF NOT EXISTS toolfold_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    name       TEXT PRIMARY KEY,
    next_seq   INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS kv_values (
    session   TEXT NOT NULL,
    scope_id  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (session, scope_id, namespace, key)
);
CREATE TABLE IF NOT EXISTS list_elements (
    session   TEXT NOT NULL,
    scope_id  TEXT NOT NULL,
    namespace TEXT NOT NULL,
    key       TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    value     TEXT NOT NULL,
    tag       TEXT,
    PRIMARY KEY (session, scope_id, namespace, key, seq)
);
CREATE TABLE IF NOT EXISTS entries (
    session TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    key     TEXT,
    summary TEXT,
    value   TEXT NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE TABLE IF NOT EXISTS retirements (
    session  TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    PRIMARY KEY (session, seq)
);
"""


# SQLite primary result codes (the low byte of an extended code).
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_NOTADB = 26


def no_space(directory: Path) -> bool:
    try:
        return os.statvfs(directory).f_bavail == 0
    except (OSError, AttributeError):
        return False


def now_iso() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def apply_write(
    cur: sqlite3.Cursor, session: str, write: Write, seq: int, data: str | None
) -> None:
    """Execute one write inside the open transaction (module level so tests can inject
    a failure in the middle of a transaction)."""
    for sql, params in write_statements(SQLITE, session, write, seq, data):
        cur.execute(sql, params)


#: How long a statement waits for another process's lock before failing.
BUSY_TIMEOUT_MS = 30_000

#: Page size of a new database file. Every commit rewrites a handful of small pages
#: besides its payload (the sessions row, a table and an index leaf, the freelist),
#: and WAL mode writes each as a whole page frame: at 1 KB instead of SQLite's 4 KB a
#: small op batch costs a quarter of the page writes (docs/storage.md, "SQLite writes").
PAGE_SIZE = 1024


#: Free pages a retirement must leave before the file is tidied (``TIDY_FREE_PAGES``
#: KB at 1 KB pages). A short call retires a handful of pages, which the next calls
#: reuse; tidying after each of them (a WAL checkpoint: two more syncs and a truncate)
#: cost more than the whole rest of its commits (docs/BENCHMARKS.md, "The cost of a
#: small call").
TIDY_FREE_PAGES = 64


def gives_pages_back(conn: sqlite3.Connection) -> bool:
    """Whether the file was made with ``auto_vacuum = INCREMENTAL`` (every file this
    version creates): only such a file can hand freed pages back. A file keeps its mode
    for its life (only a ``VACUUM`` changes it), so a connection asks once."""
    return bool(conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2)


def tidy_after_retirement(conn: sqlite3.Connection) -> None:
    """After a commit that retired a scope (a settlement) that left at least
    ``TIDY_FREE_PAGES`` pages free: hand the freed pages back to the file system and
    shrink the WAL, so the file after settle holds about what is live.

    Both run after the commit, outside it: the settlement is durable already, and a
    failure here (another process holding a read snapshot) only leaves the space for
    later. ``incremental_vacuum`` acts on files created with ``auto_vacuum =
    INCREMENTAL`` (every file this version creates; a file made before, which cannot
    give pages back, reuses its free pages in place and is never tidied: the caller asks
    :func:`gives_pages_back` once); the checkpoint does not wait for readers (busy
    timeout 0 for its duration).
    """
    try:
        if conn.execute("PRAGMA freelist_count").fetchone()[0] < TIDY_FREE_PAGES:
            return
        # executescript steps the pragma to the end: execute() would free one page.
        conn.executescript("PRAGMA incremental_vacuum")
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    except sqlite3.Error:
        pass
