"""What the shared session and repository code (``_base.py``) says when it refuses: the
messages name the bad value and the way out, the errors carry their fields, and a
session or repository describes itself by name and state."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from toolfold.storage import (
    ClosedError,
    ConflictError,
    CorruptStoreError,
    FsyncPolicy,
    ReadOnlyError,
    Session,
    SessionExistsError,
    StorageError,
    append_entry,
    append_list,
    expect,
    list_address,
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
        reader = await ro.open_session("kept")
        with pytest.raises(ReadOnlyError) as info:
            await reader.commit([set_value(TOKEN, 1)])
        assert str(info.value) == (
            "session 'kept' was opened read-only; open it with open_session(name) from a "
            "writable repository to commit"
        )
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
        assert str(info.value) == (
            f"commit of session 's' refused: expected {TOKEN} to be 2, found 1; nothing was written"
        )
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
    assert (s.closed, s.read_only, s.notes) == (False, False, ())
    assert s.closed is False and s.read_only is False
    await s.close()
    assert repr(s) == f"<{kind} 's' closed>"
    assert repr(repo) == f"<{type(repo).__name__} {repo.location}>"
    await repo.close()
    assert repr(repo) == f"<{type(repo).__name__} {repo.location} closed>"


async def test_an_empty_key_lookup_names_the_call() -> None:
    repo = open_repository("memory:")
    try:
        s = await repo.create_session("s")
        with pytest.raises(StorageError) as info:
            await s.entries_by_key("")
        assert str(info.value) == "entries_by_key key must be non-empty"
        assert await s.entries_by_key("", prefix=True) == []
    finally:
        await repo.close()


LIST = list_address("ns", "l")


def _refusals(s: Session) -> list[tuple[Callable[[], Awaitable[object]], str]]:
    """Each call the shared session code refuses, with its exact message."""
    lst = f"read_list of {LIST}"
    return [
        (lambda: s.read_list(TOKEN), f"read_list needs a list_address(namespace, key[, scope]), got {TOKEN!r}"),  # type: ignore[arg-type]
        (lambda: s.read_list(LIST, cursor="1"), f"{lst}: cursor must be a seq (int) or None, got '1'"),  # type: ignore[arg-type]
        (lambda: s.read_list(LIST, cursor=True), f"{lst}: cursor must be a seq (int) or None, got True"),
        (lambda: s.read_list(LIST, limit=-1), f"{lst}: limit must be an int >= 0 or None, got -1"),
        (lambda: s.read_list(LIST, limit=1.5), f"{lst}: limit must be an int >= 0 or None, got 1.5"),  # type: ignore[arg-type]
        (lambda: s.read_list(LIST, limit=True), f"{lst}: limit must be an int >= 0 or None, got True"),
        (lambda: s.read_list(LIST, order="up"), f"{lst}: order must be 'asc' or 'desc', got 'up'"),  # type: ignore[arg-type]
        (lambda: s.read_list(LIST, stop_at_tag=""), f"{lst}: stop_at_tag must be a non-empty str or None, got ''"),
        (lambda: s.read_list(LIST, stop_at_tag=1), f"{lst}: stop_at_tag must be a non-empty str or None, got 1"),  # type: ignore[arg-type]
        (lambda: s.read_entries(order="up"), "read_entries: order must be 'asc' or 'desc', got 'up'"),  # type: ignore[arg-type]
        (lambda: s.read_entries(offset=-1), "read_entries: offset must be an int >= 0, got -1"),
        (lambda: s.read_entries(offset=True), "read_entries: offset must be an int >= 0, got True"),
        (lambda: s.read_entries(offset=1.0), "read_entries: offset must be an int >= 0, got 1.0"),  # type: ignore[arg-type]
        (lambda: s.read_entries(cursor="x"), "read_entries: cursor must be a seq (int) or None, got 'x'"),  # type: ignore[arg-type]
        (lambda: s.read_entries(limit=-1), "read_entries: limit must be an int >= 0 or None, got -1"),
        (lambda: s.entries_by_key("k", limit=-1), "entries_by_key: limit must be an int >= 0 or None, got -1"),
        (lambda: s.entries_by_key(3), "entries_by_key key must be a str, got int 3"),  # type: ignore[arg-type]
        (lambda: s.get_value(LIST), f"get_value needs a value(namespace, key[, scope]) address, got {LIST!r}"),  # type: ignore[arg-type]
        (lambda: s.commit("x"), "commit of session 's' needs a list of writes (or a callable returning one), got str 'x'"),  # type: ignore[call-overload]
        (lambda: s.commit([set_value(TOKEN, 1)], expect=[1]), "commit of session 's': expect must hold expect(address, value) preconditions, got int 1"),  # type: ignore[list-item]
    ]  # fmt: skip


async def test_every_refused_argument_is_named_with_the_fix() -> None:
    repo = open_repository("memory:")
    try:
        s = await repo.create_session("s")
        await s.commit([append_list(LIST, 1), append_entry("e", key="k")])
        for call, message in _refusals(s):
            with pytest.raises(StorageError) as info:
                await call()
            assert str(info.value) == message
        # ... and nothing was written or lost by any of them.
        assert s.next_seq == 3 and [e.value for e in await s.read_list(LIST)] == [1]
    finally:
        await repo.close()


async def test_session_and_repository_refusals_name_the_session_and_the_way_out() -> None:
    repo = open_repository("memory:")
    s = await repo.create_session("s")
    with pytest.raises(SessionExistsError) as exists:
        await repo.create_session("s")
    assert str(exists.value) == "session 's' already exists in memory: (and is open)"
    with pytest.raises(StorageError) as twice:
        await repo.open_session("s")
    assert str(twice.value) == (
        "session 's' is already open in this repository (memory:); "
        "share that Session object or close it first"
    )
    with pytest.raises(StorageError) as bad:
        await repo.create_session(".hidden")
    assert str(bad.value) == (
        "invalid session name '.hidden': use 1-128 characters of A-Z a-z 0-9 . _ - "
        "not starting with '.'"
    )
    with pytest.raises(ReadOnlyError) as ro:
        await repo.open_session("t", create=True, read_only=True)
    assert str(ro.value) == "cannot create session 't' with a read-only open of memory:"
    await s.close()
    with pytest.raises(ClosedError) as closed:
        await s.read_entries()
    assert str(closed.value) == "session 's' is closed; open it again from its repository"
    await repo.close()
    with pytest.raises(ClosedError) as gone:
        await repo.list_sessions()
    assert str(gone.value) == "repository memory: is closed; open it again"


def test_a_bad_fsync_policy_names_the_field() -> None:
    for kwargs, name in (({"main": "always"}, "main"), ({"side": "always"}, "side")):
        with pytest.raises(StorageError) as info:
            FsyncPolicy(**kwargs)  # type: ignore[arg-type]
        assert str(info.value) == f"FsyncPolicy.{name} must be 'commit' or 'none', got 'always'"


async def test_entries_by_key_returns_at_most_limit() -> None:
    repo = open_repository("memory:")
    try:
        s = await repo.create_session("s")
        await s.commit([append_entry(i, key="k") for i in range(3)])
        for limit in (0, 1, 2, None):
            found = await s.entries_by_key("k", limit=limit)
            assert [e.value for e in found] == [0, 1, 2][:limit]
    finally:
        await repo.close()


async def test_a_closed_reader_is_forgotten_by_its_repository(tmp_path: Path) -> None:
    # A server opens a reader per request: the repository must not keep the closed ones.
    repo = open_repository(f"sqlite:{tmp_path / 's.db'}")
    try:
        await (await repo.create_session("s")).close()
        for _ in range(3):
            reader = await repo.open_session("s", read_only=True)
            assert reader.read_only is True and repo._readers == {reader}
            await reader.close()
            assert repo._readers == set()
    finally:
        await repo.close()


async def test_a_repository_reports_its_state_and_how_it_ended_a_wait() -> None:
    repo = open_repository("memory:")
    assert repo.closed is False
    await (await repo.create_session("s")).close()
    wait = asyncio.create_task(repo.wait_for_change("s", 0))
    for _ in range(2000):  # bounded: until the wait is registered
        if repo._waiters.names:
            break
        await asyncio.sleep(0.005)
    await repo.close()
    with pytest.raises(ClosedError) as info:
        async with asyncio.timeout(10):  # a hang guard, never a timing assertion
            await wait
    assert str(info.value) == "repository memory: was closed"
    assert repo.closed is True


async def test_a_reader_refuses_to_commit_and_says_how_to(tmp_path: Path) -> None:
    repo = open_repository(f"sqlite:{tmp_path / 's.db'}")
    try:
        await (await repo.create_session("s")).close()
        reader = await repo.open_session("s", read_only=True)
        with pytest.raises(ReadOnlyError) as info:
            await reader.commit([set_value(TOKEN, 1)])
        assert str(info.value) == (
            "session 's' was opened read-only; open it with open_session(name) from a "
            "writable repository to commit"
        )
    finally:
        await repo.close()
