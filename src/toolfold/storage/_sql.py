"""What the two SQL backends (SQLite, PostgreSQL) share: table names, payloads, write SQL.

Both keep the same tables with the same meaning (only the column types and collations
of the ``CREATE TABLE`` text differ), so a write runs the same statements on either;
only the parameter marker differs (``?`` for sqlite3, ``%s`` for psycopg).
"""

from __future__ import annotations

from typing import Any

from ._addresses import Scope, SessionScope
from ._base import encode_json
from ._writes import AppendEntry, AppendList, DeleteList, DeleteValue, RetireScope, SetValue, Write

__all__ = [
    "POSTGRES",
    "SCHEMA_VERSION",
    "SQLITE",
    "TABLES",
    "Statement",
    "payload",
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
    "append_entry": "INSERT INTO entries (session, seq, value) VALUES (?, ?, ?)",
    "retire_values": "DELETE FROM kv_values WHERE session = ? AND scope_id = ?",
    "retire_lists": "DELETE FROM list_elements WHERE session = ? AND scope_id = ?",
    "retire": "INSERT INTO retirements (session, scope_id, seq) VALUES (?, ?, ?)",
}

#: The write statements of each driver's parameter style; pass one to :func:`write_statements`.
SQLITE: dict[str, str] = dict(_WRITE_SQL)
POSTGRES: dict[str, str] = {k: v.replace("?", "%s") for k, v in _WRITE_SQL.items()}


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
        return [(sql["append_entry"], (session, seq, data))]
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
