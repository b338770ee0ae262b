"""What the two SQL backends (SQLite, PostgreSQL) share: table names, payloads, write SQL.

Both keep the same tables with the same meaning (only the column types and collations
of the ``CREATE TABLE`` text differ), so a write runs the same statements on either;
only the parameter marker differs (``?`` for sqlite3, ``%s`` for psycopg).
"""

from __future__ import annotations

from typing import Any

from ._addresses import Scope, SessionScope
from ._paging import key_range
from ._records import encode_json
from ._writes import AppendEntry, AppendList, DeleteList, DeleteValue, RetireScope, SetValue, Write

__all__ = [
    "ENTRY_INDEXES",
    "POSTGRES",
    "SCHEMA_VERSION",
    "SQLITE",
    "TABLES",
    "Statement",
    "count_entries_query",
    "entries_by_key_query",
    "payload",
    "read_entries_query",
    "scope_column",
    "write_statements",
]

SCHEMA_VERSION = "toolfold-storage/1"

#: The per-session tables (besides ``sessions``), e.g. everything deleting a session empties.
TABLES = ("kv_values", "list_elements", "entries", "retirements")

Statement = tuple[str, tuple[Any, ...]]

# Written with sqlite3's marker; psycopg's is substituted once at import (no literal `?`
# appears in these statements).
_WRITE_SQL = {
    "set": "INSERT INTO kv_values (session, scope_id, namespace, key, value, seq) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session, scope_id, namespace, key) "
    "DO UPDATE SET value = excluded.value, seq = excluded.seq",
    "delete_value": "DELETE FROM kv_values WHERE session = ? AND scope_id = ? "
    "AND namespace = ? AND key = ?",
    "append_list": "INSERT INTO list_elements (session, scope_id, namespace, key, seq, value, "
    "tag) VALUES (?, ?, ?, ?, ?, ?, ?)",
    "delete_list": "DELETE FROM list_elements WHERE session = ? AND scope_id = ? "
    "AND namespace = ? AND key = ?",
    "append_entry": "INSERT INTO entries (session, seq, key, summary, value) "
    "VALUES (?, ?, ?, ?, ?)",
    "retire_values": "DELETE FROM kv_values WHERE session = ? AND scope_id = ?",
    "retire_lists": "DELETE FROM list_elements WHERE session = ? AND scope_id = ?",
    "retire": "INSERT INTO retirements (session, scope_id, seq) VALUES (?, ?, ?)",
}

#: The write statements of each driver's parameter style; pass one to :func:`write_statements`.
SQLITE: dict[str, str] = dict(_WRITE_SQL)
POSTGRES: dict[str, str] = {k: v.replace("?", "%s") for k, v in _WRITE_SQL.items()}


#: The entry indexes (both backends): a call by key, and keyed entries by position.
#: Partial, so a session's unkeyed entries cost them nothing.
ENTRY_INDEXES = (
    "CREATE INDEX IF NOT EXISTS entries_by_key ON entries (session, key, seq) "
    "WHERE key IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS entries_keyed ON entries (session, seq) WHERE key IS NOT NULL",
)

#: The entry columns a page reads: ``key`` and ``summary`` sit before ``value`` in the
#: table, so a summaries-only read never walks a large value's overflow pages.
_ENTRY_COLUMNS = "seq, key, summary"


def _for(postgres: bool, sql: str, params: tuple[Any, ...]) -> Statement:
    # Written with sqlite3's marker and its -1 for "no limit"; psycopg gets %s and NULL.
    if not postgres:
        return sql, params
    return sql.replace("?", "%s"), tuple(None if p == _NO_LIMIT else p for p in params)


class _NoLimit(int):
    pass


_NO_LIMIT = _NoLimit(-1)


def read_entries_query(
    session: str,
    cursor: int | None,
    limit: int | None,
    order: str,
    keyed: bool,
    offset: int,
    summaries: bool,
    *,
    postgres: bool,
) -> Statement:
    """A page of entries as ``Session.read_entries`` defines it; rows are
    ``(seq, key, summary[, value])``."""
    asc = order == "asc"
    cond = "seq > ?" if asc else "seq < ?"
    bound = (-(2**63) if asc else 2**63 - 1) if cursor is None else cursor
    sql = (
        f"SELECT {_ENTRY_COLUMNS}{'' if summaries else ', value'} FROM entries "
        f"WHERE session = ? AND {cond}{' AND key IS NOT NULL' if keyed else ''} "
        f"ORDER BY seq {'ASC' if asc else 'DESC'} LIMIT ? OFFSET ?"
    )
    return _for(postgres, sql, (session, bound, _limit(limit), offset))


def _limit(limit: int | None) -> int:
    return _NO_LIMIT if limit is None else limit


def entries_by_key_query(
    session: str, key: str, prefix: bool, limit: int | None, *, postgres: bool
) -> Statement:
    """Entries under ``key`` (or a key prefix), by seq, through ``entries_by_key``."""
    params: tuple[str, ...]
    if not prefix:
        cond, params = "key = ?", (key,)
    else:
        low, high = key_range(key)
        cond = "key >= ?" if high is None else "key >= ? AND key < ?"
        params = (low,) if high is None else (low, high)
    sql = (
        f"SELECT {_ENTRY_COLUMNS}, value FROM entries WHERE session = ? AND key IS NOT NULL "
        f"AND {cond} ORDER BY seq LIMIT ?"
    )
    return _for(postgres, sql, (session, *params, _limit(limit)))


def count_entries_query(session: str, keyed: bool, *, postgres: bool) -> Statement:
    """The number of a session's entries (keyed ones only when ``keyed``)."""
    where = " AND key IS NOT NULL" if keyed else ""
    return _for(postgres, f"SELECT count(*) FROM entries WHERE session = ?{where}", (session,))


def scope_column(scope: Scope) -> str:
    """The ``scope_id`` column value of ``scope`` (``''`` for the session scope)."""
    return "" if isinstance(scope, SessionScope) else scope.id


def payload(write: Write) -> str | None:
    """The JSON text a write stores (``None`` for a write that stores no value)."""
    if isinstance(write, SetValue):
        return encode_json(write.value).decode()
    if isinstance(write, AppendList):
        return encode_json(write.element).decode()
    if isinstance(write, AppendEntry):
        return encode_json(write.entry).decode()
    return None


def write_statements(
    sql: dict[str, str], session: str, write: Write, seq: int, data: str | None
) -> list[Statement]:
    """The statements that apply one write (``data`` is its :func:`payload`), in order."""
    if isinstance(write, SetValue):
        a = write.address
        return [(sql["set"], (session, scope_column(a.scope), a.namespace, a.key, data, seq))]
    if isinstance(write, DeleteValue):
        a = write.address
        return [(sql["delete_value"], (session, scope_column(a.scope), a.namespace, a.key))]
    if isinstance(write, AppendList):
        b = write.address
        params = (session, scope_column(b.scope), b.namespace, b.key, seq, data, write.tag)
        return [(sql["append_list"], params)]
    if isinstance(write, DeleteList):
        b = write.address
        return [(sql["delete_list"], (session, scope_column(b.scope), b.namespace, b.key))]
    if isinstance(write, AppendEntry):
        summary = None if write.summary is None else encode_json(write.summary).decode()
        return [(sql["append_entry"], (session, seq, write.key, summary, data))]
    if isinstance(write, RetireScope):
        # Everything of the scope has a smaller seq than this retirement (seqs only
        # grow), so the dead data is simply all of the scope's rows.
        sid = write.scope.id
        return [
            (sql["retire_values"], (session, sid)),
            (sql["retire_lists"], (session, sid)),
            (sql["retire"], (session, sid, seq)),
        ]
    return []
