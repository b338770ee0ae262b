"""SQLite backend specifics: rollback, corrupt files, pragmas, the worker thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from toolfold.storage import (
    BackendError,
    CorruptStoreError,
    FsyncPolicy,
    ListElement,
    Session,
    _sqlite_file,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    open_repository,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._sqlite import SqliteRepository

OP = ephemeral_scope("op1")


async def _seeded(path: Path) -> tuple[SqliteRepository, Session]:
    repo = SqliteRepository(path)
    s = await repo.open_session("s", create=True)
    await s.commit(
        [set_value(value("ns", "k", OP), "scoped"), append_list(list_address("ns", "l", OP), 1)]
    )
    await s.commit([set_value(value("ns", "k"), "session"), append_entry("e1")])
    return repo, s


async def _state(s: Session) -> list[Any]:
    return [
        await s.get_value(value("ns", "k", OP)),
        await s.read_list(list_address("ns", "l", OP)),
        await s.get_value(value("ns", "k")),
        await s.read_entries(),
        await s.live_scopes(),
    ]


EXPECTED = ["scoped", [ListElement(2, 1, None)], "session", [], [OP]]


async def test_injected_failure_mid_transaction_rolls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, s = await _seeded(tmp_path / "t.db")
    before = await _state(s)
    real = _sqlite_file.apply_write
    calls = 0

    def failing(cur: sqlite3.Cursor, session: str, write: Any, seq: int, data: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # after the entry and the retirement have executed
            raise sqlite3.OperationalError("disk I/O error (injected)")
        real(cur, session, write, seq, data)

    monkeypatch.setattr(_sqlite_file, "apply_write", failing)
    settle = [append_entry("result"), retire_scope(OP), set_value(value("ns", "done"), True)]
    with pytest.raises(
        BackendError, match=r"SQLite failed on .*t\.db: disk I/O error \(injected\)"
    ) as e:
        await s.commit(settle)
    assert isinstance(e.value.__cause__, sqlite3.OperationalError)
    assert calls == 3
    assert await _state(s) == before  # the retirement's DELETEs were rolled back too
    monkeypatch.setattr(_sqlite_file, "apply_write", real)
    r = await s.commit(settle)
    assert r.seqs[0] >= 5 + 3  # seqs 5..7 may have been burnt, never reused
    await repo.close()
    repo2 = SqliteRepository(tmp_path / "t.db")
    s2 = await repo2.open_session("s")
    assert await s2.live_scopes() == []
    assert [e.value for e in await s2.read_entries()] == ["e1", "result"]
    assert s2.next_seq == r.seqs[-1] + 1
    await repo2.close()


async def test_database_level_failure_rolls_back(tmp_path: Path) -> None:
    repo, s = await _seeded(tmp_path / "t.db")
    with sqlite3.connect(tmp_path / "t.db") as other:
        other.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON entries WHEN NEW.value = '\"boom\"' "
            "BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END"
        )
    before = await _state(s)
    with pytest.raises(BackendError, match="refused by trigger"):
        await s.commit(
            [set_value(value("ns", "k"), "changed"), append_entry("boom"), retire_scope(OP)]
        )
    assert await _state(s) == before
    await repo.close()


async def test_two_connections_share_the_sequence(tmp_path: Path) -> None:
    """Two repositories (think: two processes) on one file never hand out a seq twice."""
    a = SqliteRepository(tmp_path / "t.db")
    b = SqliteRepository(tmp_path / "t.db")
    sa = await a.open_session("s", create=True)
    sb = await b.open_session("s")
    seqs = []
    for i in range(6):
        s = sa if i % 2 else sb
        seqs += (await s.commit([append_list(list_address("ns", "l"), i)])).seqs
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert [e.value for e in await sa.read_list(list_address("ns", "l"))] == list(range(6))
    await a.close()
    await b.close()


async def test_garbage_file_is_a_clear_corrupt_store_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    garbage = b"this is not a database\x00" * 200
    path.write_bytes(garbage)
    repo = open_repository(f"sqlite:{path}")
    with pytest.raises(CorruptStoreError) as e:
        await repo.list_sessions()
    assert str(path) in str(e.value) and "is not a usable toolfold SQLite store" in str(e.value)
    assert e.value.path == str(path)
    assert path.read_bytes() == garbage  # nothing written into it
    await repo.close()


async def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER)")
    repo = SqliteRepository(path)
    with pytest.raises(
        CorruptStoreError,
        match=r"other\.db is an SQLite database but not a toolfold store \(tables: customers\)",
    ):
        await repo.open_session("s", create=True)
    await repo.close()


@pytest.mark.parametrize(("policy", "expected"), [("commit", 2), ("none", 1)])
async def test_fsync_policy_maps_to_pragma_synchronous(
    tmp_path: Path, policy: Any, expected: int
) -> None:
    repo = SqliteRepository(tmp_path / "t.db", fsync=FsyncPolicy(main=policy))

    def pragmas(conn: sqlite3.Connection) -> tuple[int, str]:
        return (
            conn.execute("PRAGMA synchronous").fetchone()[0],
            conn.execute("PRAGMA journal_mode").fetchone()[0],
        )

    assert await repo._run(pragmas) == (expected, "wal")  # 2 = FULL, 1 = NORMAL
    await repo.close()


@pytest.mark.parametrize(("main", "side"), [("commit", "none"), ("none", "commit")])
async def test_each_commit_is_synced_by_its_scopes_policy(
    tmp_path: Path, main: Any, side: Any
) -> None:
    # One database, but the two halves of the policy still apply per transaction:
    # `side` to ephemeral scopes (pending output, memos), `main` to the session scope.
    repo = SqliteRepository(tmp_path / "t.db", fsync=FsyncPolicy(main=main, side=side))
    levels = {"commit": 2, "none": 1}  # FULL, NORMAL
    s = await repo.open_session("s", create=True)
    seen: list[int] = []
    original = _sqlite_file.apply_write

    def spying(cur: sqlite3.Cursor, *args: Any) -> None:
        seen.append(cur.connection.execute("PRAGMA synchronous").fetchone()[0])
        original(cur, *args)

    _sqlite_file.apply_write = spying  # type: ignore[assignment]
    try:
        await s.commit([append_list(list_address("out", "x", ephemeral_scope("op")), 1)])
        await s.commit([set_value(value("k", "v"), 1)])
        await s.commit([append_list(list_address("out", "x", ephemeral_scope("op")), 2)])
    finally:
        _sqlite_file.apply_write = original  # type: ignore[assignment]
    assert seen == [levels[side], levels[main], levels[side]]
    await repo.close()


async def test_commits_run_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = SqliteRepository(tmp_path / "t.db")
    s = await repo.open_session("s", create=True)
    in_worker = threading.Event()
    release = threading.Event()
    real = _sqlite_file.apply_write

    def blocking(*args: Any) -> None:
        in_worker.set()
        release.wait()  # the worker thread blocks; the loop must not
        real(*args)

    monkeypatch.setattr(_sqlite_file, "apply_write", blocking)
    commit = asyncio.create_task(s.commit([append_entry("x")]))
    await asyncio.to_thread(in_worker.wait)
    other = asyncio.Event()
    asyncio.get_running_loop().call_soon(other.set)
    await other.wait()  # the loop is alive while the worker is blocked
    assert not commit.done()
    release.set()
    assert (await commit).seqs == (1,)
    await repo.close()


def test_open_repository_urls(tmp_path: Path) -> None:
    from toolfold.storage import MemoryRepository, StorageError
    from toolfold.storage._jsonl import JsonlRepository

    assert isinstance(open_repository("memory:"), MemoryRepository)
    r = open_repository(f"sqlite:{tmp_path / 'a.db'}")
    assert isinstance(r, SqliteRepository) and r.path == tmp_path / "a.db"
    r = open_repository(str(tmp_path / "b.db"))
    assert isinstance(r, SqliteRepository) and r.path == tmp_path / "b.db"
    assert isinstance(open_repository(f"jsonl:{tmp_path}"), JsonlRepository)
    assert isinstance(open_repository(str(tmp_path)), JsonlRepository)
    assert not (tmp_path / "a.db").exists()  # nothing opened before first use
    with pytest.raises(StorageError) as e:
        open_repository("mysql://x")
    assert str(e.value) == (
        "unknown store URL 'mysql://x': use one of memory:, sqlite:PATH, jsonl:DIR, "
        "postgresql://... (a plain path ending in .db means sqlite, an existing directory "
        "means jsonl)"
    )
    with pytest.raises(StorageError, match=r"names no file; use sqlite:PATH/TO/file\.db"):
        open_repository("sqlite:")


async def test_store_from_before_entry_keys_is_upgraded_in_place(tmp_path: Path) -> None:
    """A store whose entries table has no key/summary columns (written by an earlier
    version) opens, keeps its entries, and takes keyed entries from then on."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.executescript(
        """
        CREATE TABLE toolfold_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO toolfold_meta VALUES ('schema', 'toolfold-storage/1');
        CREATE TABLE sessions (name TEXT PRIMARY KEY, next_seq INTEGER NOT NULL,
                               created_at TEXT NOT NULL);
        INSERT INTO sessions VALUES ('s', 2, '2024-01-01');
        CREATE TABLE entries (session TEXT NOT NULL, seq INTEGER NOT NULL,
                              value TEXT NOT NULL, PRIMARY KEY (session, seq));
        INSERT INTO entries VALUES ('s', 1, '{"old":true}');
        """
    )
    conn.close()
    async with SqliteRepository(path, read_only=True) as reader:
        # A reader changes nothing, yet reads the old entries (as unkeyed ones).
        s = await reader.open_session("s")
        assert [(e.value, e.key) for e in await s.read_entries(order="desc", limit=1)] == [
            ({"old": True}, None)
        ]
        assert await s.count_entries(keyed=True) == 0 and await s.entries_by_key("c1") == []
    conn = sqlite3.connect(path)
    assert "key" not in {r[1] for r in conn.execute("PRAGMA table_info(entries)")}
    conn.close()
    async with SqliteRepository(path) as repo:
        s = await repo.open_session("s")
        await s.commit([append_entry({"new": True}, key="c1", summary={"n": 1})])
        assert [(e.value, e.key, e.summary) for e in await s.read_entries()] == [
            ({"old": True}, None, None),
            ({"new": True}, "c1", {"n": 1}),
        ]
        assert [e.seq for e in await s.entries_by_key("c1")] == [2]
        assert await s.count_entries(keyed=True) == 1


async def test_settlement_gives_retired_pages_back_and_truncates_the_wal(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SqliteRepository(path) as repo:
        s = await repo.open_session("s", create=True)
        op = ephemeral_scope("op")
        for i in range(50):
            await s.commit([append_list(list_address("out", "x", op), "y" * 5000 + str(i))])
        grown = path.stat().st_size + (tmp_path / "s.db-wal").stat().st_size
        await s.commit([append_entry("result"), retire_scope(op)])
        # While the store is still open: the freed pages are gone and the WAL is empty.
        assert (tmp_path / "s.db-wal").stat().st_size == 0
        assert path.stat().st_size < grown / 10
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == _sqlite_file.PAGE_SIZE
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # incremental
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
    finally:
        conn.close()


async def test_a_small_settlement_leaves_the_wal_alone(tmp_path: Path) -> None:
    # A short call frees a page or two, which the next calls reuse: checkpointing and
    # truncating the WAL after each of them cost more than all their commits together.
    path = tmp_path / "s.db"
    async with SqliteRepository(path) as repo:
        s = await repo.open_session("s", create=True)
        for k in range(20):
            op = ephemeral_scope(f"op{k}")
            await s.commit([append_list(list_address("out", "x", op), "short")])
            await s.commit([append_entry({"r": k}), retire_scope(op)])
            assert (tmp_path / "s.db-wal").stat().st_size > 0

        def free(conn: sqlite3.Connection) -> int:
            return int(conn.execute("PRAGMA freelist_count").fetchone()[0])

        assert await repo._run(free) < _sqlite_file.TIDY_FREE_PAGES
        assert [e.value for e in await s.read_entries()] == [{"r": k} for k in range(20)]
