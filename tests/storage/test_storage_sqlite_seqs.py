"""SQLite: how a commit claims its seqs (one ``UPDATE ... RETURNING`` where SQLite has
it, a read then an update where not) and when a settlement tidies the file."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.storage import (
    ConflictError,
    SessionNotFoundError,
    _sqlite_file,
    _sqlite_sync,
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

CLAIMS = [False] + ([True] if sqlite3.sqlite_version_info >= (3, 35, 0) else [])
"""The ways this SQLite can claim seqs: the two-statement one always, RETURNING if it
has it (the default there)."""

STEPS = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["ok", "conflict"]), st.integers(1, 4)),
    min_size=1,
    max_size=12,
)


@pytest.mark.parametrize("in_one", CLAIMS)
def test_seqs_grow_and_are_never_handed_out_twice(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, in_one: bool
) -> None:
    monkeypatch.setattr(_sqlite_sync, "CLAIM_IN_ONE_STATEMENT", in_one)

    @settings(max_examples=25, deadline=None)
    @given(STEPS)
    def run(steps: list[tuple[str, str, int]]) -> None:
        # Two repositories on one file (think: two processes), taking turns; a commit
        # whose precondition fails writes nothing and its seqs are never reused.
        path = tmp_path_factory.mktemp("seqs") / "s.db"

        async def scenario() -> None:
            repos = {"a": SqliteRepository(path), "b": SqliteRepository(path)}
            sa = await repos["a"].open_session("s", create=True)
            sessions = {"a": sa, "b": await repos["b"].open_session("s")}
            guard = value("ns", "guard")
            handed: list[int] = []
            kept: list[int] = []
            try:
                for n, (who, kind, count) in enumerate(steps):
                    writes = [append_list(list_address("ns", "l"), [n, i]) for i in range(count)]
                    if kind == "conflict":
                        with pytest.raises(ConflictError):
                            await sessions[who].commit(writes, expect=[expect(guard, "never")])
                        continue
                    seqs = (await sessions[who].commit(writes)).seqs
                    assert len(seqs) == count
                    assert list(seqs) == list(range(seqs[0], seqs[0] + count))
                    assert not handed or seqs[0] > handed[-1]
                    handed += seqs
                    kept += [n] * count
                read = await sa.read_list(list_address("ns", "l"))
                assert [e.seq for e in read] == handed
                assert [e.value[0] for e in read] == kept
            finally:
                for repo in repos.values():
                    await repo.close()

        asyncio.run(scenario())

    run()


@pytest.mark.parametrize("in_one", CLAIMS)
async def test_a_session_deleted_meanwhile_is_named_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_one: bool
) -> None:
    monkeypatch.setattr(_sqlite_sync, "CLAIM_IN_ONE_STATEMENT", in_one)
    async with SqliteRepository(tmp_path / "s.db") as a, SqliteRepository(tmp_path / "s.db") as b:
        s = await a.open_session("s", create=True)
        await s.commit([append_entry("first")])
        await b.delete_session("s")
        with pytest.raises(SessionNotFoundError, match="no longer exists"):
            await s.commit([append_entry("second")])
    conn = sqlite3.connect(tmp_path / "s.db")
    try:
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0
    finally:
        conn.close()


async def test_a_file_that_cannot_give_pages_back_is_never_tidied(tmp_path: Path) -> None:
    # A store made before auto_vacuum reuses its free pages in place: however many a
    # settlement frees, its WAL is not checkpointed and truncated after it.
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE made_first (x)")  # the page size and auto_vacuum are set now
    conn.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE made_first")
    conn.close()
    async with SqliteRepository(path) as repo:
        assert repo.file.gives_pages_back is False
        s = await repo.open_session("s", create=True)
        op = ephemeral_scope("op")
        for i in range(50):
            await s.commit([append_list(list_address("out", "x", op), "y" * 9000 + str(i))])
        await s.commit([append_entry("result"), retire_scope(op)])
        assert (tmp_path / "old.db-wal").stat().st_size > 0

        def free(c: sqlite3.Connection) -> int:
            return int(c.execute("PRAGMA freelist_count").fetchone()[0])

        # More pages left free than a tidy waits for: in the file, for reuse.
        assert await repo._run(free) >= _sqlite_file.TIDY_FREE_PAGES


async def test_a_new_file_gives_pages_back(tmp_path: Path) -> None:
    async with SqliteRepository(tmp_path / "new.db") as repo:
        s = await repo.open_session("s", create=True)
        assert repo.file.gives_pages_back is True
        await s.commit([set_value(value("ns", "k"), 1)])
