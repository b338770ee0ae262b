"""The change signal (``Repository.wait_for_change`` / ``changes``) on every backend: a
commit made through another repository object (another connection; for SQLite and
JSONL also another process) wakes the waiter with the new high-water seq; nothing that
is not a commit of the waited session wakes it; closing the repository ends the wait;
on PostgreSQL any number of waiters share one LISTEN connection."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from toolfold.storage import (
    ClosedError,
    Repository,
    SessionNotFoundError,
    StorageError,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    open_repository,
    retire_scope,
)

GUARD = 30  # seconds: a hang guard around waits that must end, never a timing assertion
SRC = Path(__file__).resolve().parents[2] / "src"


async def _registered(repo: Repository, count: int) -> None:
    """Wait (bounded) until ``count`` waits are registered with ``repo``."""
    for _ in range(2000):
        if sum(len(w) for w in repo._waiters._waiting.values()) >= count:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{count} waits never registered")


@pytest.fixture(params=["memory", "sqlite", "jsonl", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    kind = request.param
    if kind == "memory":
        return "memory:"
    if kind == "sqlite":
        return f"sqlite:{tmp_path / 'toolfold.db'}"
    if kind == "jsonl":
        return f"jsonl:{tmp_path / 'sessions'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
async def two(store: str) -> AsyncIterator[tuple[Repository, Repository]]:
    """A writer repository and a follower repository on one store (memory: the same
    object, since a memory store lives in one repository)."""
    writer = open_repository(store)
    follower = writer if store == "memory:" else open_repository(store)
    try:
        yield writer, follower
    finally:
        await writer.close()
        await follower.close()


async def test_a_commit_from_another_connection_wakes_the_waiter(
    two: tuple[Repository, Repository],
) -> None:
    writer_repo, follower = two
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_entry("before")])
    async with asyncio.timeout(GUARD):
        # Already past: returns at once with the high-water mark.
        assert await follower.wait_for_change("s", 0) == 1
        waiting = asyncio.create_task(follower.wait_for_change("s", 1))
        await _registered(follower, 1)
        await writer.commit([append_entry("one"), append_entry("two")])
        assert await waiting == 3
        # An ephemeral (side-file on JSONL) commit counts as well.
        waiting = asyncio.create_task(follower.wait_for_change("s", 3))
        await writer.commit([append_list(list_address("ns", "l", ephemeral_scope("op")), 1)])
        assert await waiting == 4


async def test_only_a_commit_of_the_waited_session_wakes_it(
    two: tuple[Repository, Repository], store: str
) -> None:
    writer_repo, follower = two
    # "a-probe" sorts before "z-quiet": a backend that looks at sessions in name order
    # looks at z-quiet after the probe's commit, so the probe waking proves z-quiet's
    # state (a torn line on JSONL) was looked at too.
    quiet = await writer_repo.open_session("z-quiet", create=True)
    probe = await writer_repo.open_session("a-probe", create=True)
    await quiet.commit([append_entry("x")])
    async with asyncio.timeout(GUARD):
        waiting = asyncio.create_task(follower.wait_for_change("z-quiet", 1))
        for n in range(3):
            if store.startswith("jsonl:"):
                # A record still being written (no newline yet) is not a commit.
                with open(Path(store[len("jsonl:") :]) / "z-quiet.jsonl", "ab") as f:
                    f.write(b'["00000000",["e",')
            probed = asyncio.create_task(follower.wait_for_change("a-probe", n))
            await probe.commit([append_entry(n)])
            assert await probed == n + 1
            assert not waiting.done()
        if store.startswith("jsonl:"):
            await quiet.close()  # the writer drops the torn tail when it opens again
            quiet = await writer_repo.open_session("z-quiet")
        await quiet.commit([append_entry("y")])
        assert await waiting == 2


async def test_changes_yields_each_new_high_water_mark(
    two: tuple[Repository, Repository],
) -> None:
    writer_repo, follower = two
    writer = await writer_repo.open_session("s", create=True)
    changes = follower.changes("s")
    async with asyncio.timeout(GUARD):
        first = asyncio.ensure_future(anext(changes))
        await writer.commit([append_entry(1)])
        assert await first == 1
        for n in range(2, 6):
            nxt = asyncio.ensure_future(anext(changes))
            await writer.commit([append_entry(n)])
            assert await nxt == n
    await changes.aclose()  # type: ignore[attr-defined]


async def test_waiting_for_a_missing_session_is_an_error(
    two: tuple[Repository, Repository],
) -> None:
    _, follower = two
    with pytest.raises(SessionNotFoundError, match="no session 'nope'"):
        await follower.wait_for_change("nope", 0)
    with pytest.raises(StorageError, match="after_seq must be a seq"):
        await follower.wait_for_change("nope", "1")  # type: ignore[arg-type]


async def test_closing_the_repository_ends_every_wait(store: str) -> None:
    writer_repo = open_repository(store)
    follower = writer_repo if store == "memory:" else open_repository(store)
    try:
        await writer_repo.create_session("s")
        async with asyncio.timeout(GUARD):
            waits = [asyncio.create_task(follower.wait_for_change("s", 0)) for _ in range(3)]
            await _registered(follower, 3)
            await follower.close()
            for wait in waits:
                with pytest.raises(ClosedError):
                    await wait
    finally:
        await writer_repo.close()
        await follower.close()


_CHILD = """
import asyncio, sys
from toolfold.storage import append_entry, open_repository

async def main():
    repo = open_repository(sys.argv[1])
    session = await repo.open_session("s", create=True)
    for n in range(int(sys.argv[2])):
        await session.commit([append_entry(n)])
        print(session.next_seq - 1, flush=True)
        sys.stdin.readline()  # the parent says when to commit again
    await repo.close()

asyncio.run(main())
"""


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_a_commit_from_another_process_wakes_the_waiter(kind: str, tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'toolfold.db'}" if kind == "sqlite" else f"jsonl:{tmp_path}"
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CHILD,
        url,
        "3",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(SRC)},
    )
    assert child.stdin is not None and child.stdout is not None
    follower = open_repository(url)
    try:
        async with asyncio.timeout(GUARD):
            assert int(await child.stdout.readline()) == 1
            for n in range(1, 3):
                waiting = asyncio.create_task(follower.wait_for_change("s", n))
                await _registered(follower, 1)
                child.stdin.write(b"\n")  # commit the next one
                assert await waiting == n + 1
                assert int(await child.stdout.readline()) == n + 1
            child.stdin.write(b"\n")
            assert await child.wait() == 0
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()
        await follower.close()


async def _listeners(url: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN %'"
        )
        row = await cur.fetchone()
        assert row is not None
        return int(row[0])


async def _no_listeners(url: str) -> None:
    """Wait (bounded) until no backend of the database is a LISTEN connection: a closed
    connection's server process leaves ``pg_stat_activity`` shortly after the client
    closed it, not at the same instant."""
    for _ in range(400):
        if await _listeners(url) == 0:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{await _listeners(url)} LISTEN connection(s) still open after close")


async def test_postgresql_waiters_share_one_listen_connection(postgres_url: str) -> None:
    writer_repo, follower = open_repository(postgres_url), open_repository(postgres_url)
    try:
        sessions = [await writer_repo.open_session(f"s{i}", create=True) for i in range(8)]
        await _no_listeners(postgres_url)
        async with asyncio.timeout(GUARD):
            # 24 waiters on 8 sessions, as a server following 8 lanes with 3 each.
            waits = [
                asyncio.create_task(follower.wait_for_change(f"s{i % 8}", 0)) for i in range(24)
            ]
            await _registered(follower, 24)
            await follower._ensure_watcher()
            assert await _listeners(postgres_url) == 1
            for session in sessions:
                await session.commit([append_entry("x")])
            assert await asyncio.gather(*waits) == [1] * 24
            assert await _listeners(postgres_url) == 1  # still one, not one per wait
    finally:
        await writer_repo.close()
        await follower.close()
    await _no_listeners(postgres_url)


async def test_a_retired_scope_does_not_confuse_the_jsonl_signal(tmp_path: Path) -> None:
    # Retiring unlinks a side file; its seqs are below the retirement's, so the high
    # water read from the remaining files is still the session's.
    url = f"jsonl:{tmp_path}"
    writer_repo, follower = open_repository(url), open_repository(url)
    try:
        writer = await writer_repo.open_session("s", create=True)
        scope = ephemeral_scope("op")
        await writer.commit([append_list(list_address("ns", "l", scope), 1)])
        async with asyncio.timeout(GUARD):
            waiting = asyncio.create_task(follower.wait_for_change("s", 1))
            await writer.commit([retire_scope(scope), append_entry("done")])
            assert await waiting == 3
    finally:
        await writer_repo.close()
        await follower.close()


async def test_a_lost_listen_connection_fails_the_waits_and_the_next_wait_listens_again(
    postgres_url: str,
) -> None:
    writer_repo, follower = open_repository(postgres_url), open_repository(postgres_url)
    try:
        writer = await writer_repo.open_session("s", create=True)
        async with asyncio.timeout(GUARD):
            waiting = asyncio.create_task(follower.wait_for_change("s", 0))
            await _registered(follower, 1)
            await follower._ensure_watcher()
            async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as c:
                await c.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND query LIKE 'LISTEN %'"
                )
            with pytest.raises(StorageError, match="listening for commits on postgresql"):
                await waiting
            await _no_listeners(postgres_url)  # the terminated backend is gone
            # The next wait starts a new watcher with a new LISTEN connection.
            waiting = asyncio.create_task(follower.wait_for_change("s", 0))
            await _registered(follower, 1)
            await follower._ensure_watcher()
            assert await _listeners(postgres_url) == 1
            await writer.commit([append_entry("x")])
            assert await waiting == 1
    finally:
        await writer_repo.close()
        await follower.close()
