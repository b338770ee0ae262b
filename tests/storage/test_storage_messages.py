"""What the shared session and repository code (``_base.py``) says when it refuses: the
messages name the bad value and the way out, the errors carry their fields, and a
session or repository describes itself by name and state."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from toolfold.storage import (
    ConflictError,
    CorruptStoreError,
    ReadOnlyError,
    StorageError,
    append_entry,
    expect,
    open_repository,
    set_value,
    value,
)

TOKEN = value("lease", "token")


async def test_a_read_only_repository_names_what_it_refused(tmp_path: Path) -> None:
    repo = open_repository(f"sqlite:{tmp_path / 's.db'}")
    await (await repo.create_session("kept")).close()
    await repo.close()
    ro = open_repository(f"sqlite:{tmp_path / 's.db'}", read_only=True)
    try:
        where = f"repository {ro.location} was opened read-only"
        with pytest.raises(ReadOnlyError) as info:
            await ro.create_session("new")
        assert str(info.value) == f"cannot create session 'new': {where}"
        with pytest.raises(ReadOnlyError) as info:
            await ro.delete_session("kept")
        assert str(info.value) == f"cannot delete session 'kept': {where}"
        assert await ro.list_sessions() == ["kept"]
    finally:
        await ro.close()


async def test_deleting_an_open_session_says_to_close_it_first() -> None:
    repo = open_repository("memory:")
    try:
        await repo.create_session("busy")
        with pytest.raises(StorageError) as info:
            await repo.delete_session("busy")
        assert str(info.value) == (
            "session 'busy' is open in this repository (memory:); close it before deleting it"
        )
        assert await repo.list_sessions() == ["busy"]
    finally:
        await repo.close()


async def test_a_refused_precondition_carries_its_address() -> None:
    repo = open_repository("memory:")
    try:
        s = await repo.create_session("s")
        await s.commit([set_value(TOKEN, 1)])
        with pytest.raises(ConflictError) as info:
            await s.commit([set_value(TOKEN, 3)], expect=[expect(TOKEN, 2)])
        assert (info.value.address, info.value.expected, info.value.found) == (TOKEN, 2, 1)
    finally:
        await repo.close()


async def _damaged_store(tmp_path: Path, table: str) -> tuple[Path, int]:
    """An SQLite store holding one value and one entry, whose row in ``table`` holds text
    that is not JSON; returns the file and the seq of the damaged row."""
    db = tmp_path / "s.db"
    repo = open_repository(f"sqlite:{db}")
    try:
        s = await repo.create_session("s")
        seqs = (await s.commit([set_value(TOKEN, 1)])).seqs
        seqs += (await s.commit([append_entry("e")])).seqs
    finally:
        await repo.close()
    with sqlite3.connect(db) as conn:
        assert conn.execute(f"UPDATE {table} SET value = '{{torn'").rowcount == 1
    conn.close()
    return db, seqs[table == "entries"]


async def test_a_damaged_entry_names_the_table_and_the_record(tmp_path: Path) -> None:
    db, seq = await _damaged_store(tmp_path, "entries")
    repo = open_repository(f"sqlite:{db}")
    try:
        s = await repo.open_session("s")
        with pytest.raises(CorruptStoreError) as info:
            await s.read_entries()
    finally:
        await repo.close()
    where, record = f"{db} table entries", f"session 's' seq {seq}"
    assert (info.value.path, info.value.record) == (where, record)
    message = str(info.value)
    assert message.startswith(f"{where}: record {record} is not valid JSON (")
    assert message.endswith("); the store is damaged") and "\n" not in message


async def test_a_precondition_on_a_damaged_value_is_a_corrupt_store_error(
    tmp_path: Path,
) -> None:
    db, _ = await _damaged_store(tmp_path, "kv_values")
    repo = open_repository(f"sqlite:{db}")
    try:
        s = await repo.open_session("s")
        before = s.next_seq
        with pytest.raises(CorruptStoreError) as info:
            await s.commit([set_value(TOKEN, 2)], expect=[expect(TOKEN, 1)])
        assert info.value.path == "(precondition)"
        assert str(info.value).startswith("(precondition): record None is not valid JSON")
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT value FROM kv_values").fetchall() == [("{torn",)]
        conn.close()
        assert s.next_seq >= before
    finally:
        await repo.close()


async def test_sessions_and_repositories_describe_their_state(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    repo = open_repository(f"sqlite:{db}")
    s = await repo.create_session("s")
    await s.commit([set_value(TOKEN, 1)])
    kind = type(s).__name__
    assert repr(s) == f"<{kind} 's' next_seq=2>"
    await s.close()
    assert repr(s) == f"<{kind} 's' closed>"
    assert repr(repo) == f"<{type(repo).__name__} {repo.location}>"
    await repo.close()
    assert repr(repo) == f"<{type(repo).__name__} {repo.location} closed>"
