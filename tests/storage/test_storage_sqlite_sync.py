"""The SQLite store used in line (``SyncSqliteSession``): the same file, checks, seqs and
errors as the asyncio session, on the same functions."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfold.storage import (
    ConflictError,
    FsyncPolicy,
    ListElement,
    ScopeError,
    SessionNotFoundError,
    StorageError,
    append_entry,
    append_list,
    ephemeral_scope,
    expect,
    list_address,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._sqlite import SqliteRepository
from toolfold.storage._sqlite_sync import SqliteFile, SyncSqliteSession

OP = ephemeral_scope("op1")


def _file(path: Path) -> SqliteFile:
    return SqliteFile(path, fsync=FsyncPolicy(), read_only=False)


async def test_what_the_sync_session_commits_the_async_one_reads(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    file = _file(path)
    s = SyncSqliteSession.open(file, "s", create=True)
    token = value("lease.token", "op1")
    s.commit_across(
        [set_value(token, 1)],
        [set_value(value("ns", "k", OP), "start"), append_list(list_address("ns", "l", OP), 1)],
        expect=[expect(token, None)],
    )
    assert s.commit(lambda: []).seqs == ()  # an empty plan uses no seq
    s.commit([append_entry({"done": True}, key="c1"), retire_scope(OP)], expect=[expect(token, 1)])
    assert s.next_seq == 6
    assert s.get_value(token) == 1
    file.close()

    repo = SqliteRepository(path)
    try:
        a = await repo.open_session("s")
        assert a.next_seq == 6
        assert await a.get_value(token) == 1
        assert await a.get_value(value("ns", "k", OP)) is None  # retired
        assert [e.value for e in await a.read_entries()] == [{"done": True}]
        assert await a.live_scopes() == []
        await a.commit([append_list(list_address("ns", "l", OP), 2)])
        assert await a.read_list(list_address("ns", "l", OP)) == [ListElement(6, 2, None)]
    finally:
        await repo.close()
    # ... and the other way round: the sync session continues from the stored seq.
    s2 = SyncSqliteSession.open(_file(path), "s")
    assert s2.next_seq == 7
    s2.file.close()


def test_a_failed_precondition_writes_nothing_and_burns_its_seqs(tmp_path: Path) -> None:
    s = SyncSqliteSession.open(_file(tmp_path / "s.db"), "s", create=True)
    token = value("lease.token", "op1")
    with pytest.raises(ConflictError):
        s.commit([set_value(token, 2)], expect=[expect(token, 1)])
    assert s.get_value(token) is None
    assert s.next_seq == 2  # the seq it would have used is never handed out again
    assert s.commit([set_value(token, 1)]).seqs == (2,)
    s.file.close()


def test_the_same_checks_as_the_async_session(tmp_path: Path) -> None:
    s = SyncSqliteSession.open(_file(tmp_path / "s.db"), "s", create=True)
    with pytest.raises(ScopeError):
        s.commit([set_value(value("ns", "a"), 1), set_value(value("ns", "b", OP), 2)])
    with pytest.raises(StorageError, match="needs a list of writes"):
        s.commit(lambda: None)  # type: ignore[arg-type, return-value]
    with pytest.raises(StorageError, match="retire_scope"):
        s.commit_across([retire_scope(OP)], [set_value(value("ns", "k", OP), 1)])
    with pytest.raises(SessionNotFoundError):
        SyncSqliteSession.open(s.file, "missing")
    s.close()
    with pytest.raises(StorageError, match="closed"):
        s.commit([set_value(value("ns", "a"), 1)])
    s.file.close()
