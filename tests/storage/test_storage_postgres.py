"""PostgreSQL backend specifics: many hosts on one session, NOTIFY tailing, rollback."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from toolfold.storage import (
    BackendError,
    FsyncPolicy,
    _postgres,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    open_repository,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._postgres import PostgresRepository

OP = ephemeral_scope("op1")


def repo_for(url: str, **kw: Any) -> PostgresRepository:
    repo = open_repository(url, **kw)
    assert isinstance(repo, PostgresRepository)
    return repo


async def test_two_hosts_commit_to_one_session_without_sharing_a_seq(postgres_url: str) -> None:
    hosts = [repo_for(postgres_url), repo_for(postgres_url), repo_for(postgres_url)]
    sessions = [await hosts[0].open_session("shared", create=True)]
    sessions += [await h.open_session("shared") for h in hosts[1:]]
    addr = list_address("ns", "l")
    results = await asyncio.gather(
        *(
            sessions[i % 3].commit([append_list(addr, [i, 0]), append_list(addr, [i, 1])])
            for i in range(30)
        )
    )
    seqs = sorted(s for r in results for s in r.seqs)
    assert seqs == list(range(1, 61))  # row lock on next_seq: no gap, no duplicate
    elements = await sessions[0].read_list(addr)
    for a, b in zip(elements[::2], elements[1::2], strict=True):
        assert a.value[0] == b.value[0] and b.seq == a.seq + 1  # type: ignore[index]
    for h in hosts:
        await h.close()


async def test_a_server_on_another_host_tails_a_session(postgres_url: str) -> None:
    writer_repo, viewer_repo = repo_for(postgres_url), repo_for(postgres_url)
    writer = await writer_repo.open_session("live", create=True)
    await writer.commit([append_entry("before")])
    # Already past after_seq: returns at once with the current high-water mark.
    async with asyncio.timeout(30):  # a hang guard, not a timing assertion
        assert await viewer_repo.wait_for_change("live", after_seq=0) == 1

    seen: list[int] = []
    subscribed = asyncio.Event()
    first_seen = asyncio.Event()

    async def follow() -> None:
        gen = viewer_repo.changes("live", after_seq=1)
        waiter = asyncio.ensure_future(gen.__anext__())
        subscribed.set()
        seen.append(await waiter)
        first_seen.set()
        seen.append(await gen.__anext__())
        await gen.aclose()  # type: ignore[attr-defined]

    task = asyncio.create_task(follow())
    await subscribed.wait()
    # Whether the follower's wait starts before or after this commit, it yields 2: it
    # waits first and reads the high-water mark second, so nothing falls in between.
    waiting = asyncio.create_task(viewer_repo.wait_for_change("live", after_seq=1))
    await writer.commit([append_entry("one")])
    async with asyncio.timeout(30):  # hang guards, not timing assertions
        assert await waiting == 2
        await first_seen.wait()
        await writer.commit([append_entry("two"), append_entry("three")])
        await task
    assert seen == [2, 4]  # one notification per commit, carrying its last seq
    await writer_repo.close()
    await viewer_repo.close()


async def test_notifications_only_for_committed_transactions(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = repo_for(postgres_url)
    s = await repo.open_session("s", create=True)
    await s.commit([set_value(value("ns", "k", OP), 1)])
    real = _postgres._apply
    calls = 0

    async def failing(*args: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise psycopg.errors.DiskFull("no space left (injected)")
        await real(*args)

    monkeypatch.setattr(_postgres, "_apply", failing)
    with pytest.raises(
        BackendError, match=r"commit of session 's' failed on postgresql .*injected"
    ):
        await s.commit([append_entry("settled"), retire_scope(OP)])
    monkeypatch.setattr(_postgres, "_apply", real)
    assert await s.live_scopes() == [OP]
    assert await s.get_value(value("ns", "k", OP)) == 1
    assert await s.read_entries() == []
    # the failed transaction sent no notification: the next change seen is a real commit
    waiting = asyncio.create_task(repo.wait_for_change("s", after_seq=1))
    r = await s.commit([append_entry("real")])
    async with asyncio.timeout(30):
        assert await waiting == r.last_seq
    await repo.close()


@pytest.mark.parametrize(("policy", "expected"), [("commit", "on"), ("none", "off")])
async def test_fsync_policy_maps_to_synchronous_commit(
    postgres_url: str, policy: Any, expected: str
) -> None:
    repo = repo_for(postgres_url, fsync=FsyncPolicy(main=policy))
    s = await repo.open_session("s", create=True)
    cur = await s._conn.execute("SHOW synchronous_commit")  # type: ignore[attr-defined]
    assert (await cur.fetchone())[0] == expected
    await repo.close()


async def test_unreachable_server_is_a_backend_error_without_password(tmp_path: Any) -> None:
    repo = open_repository(f"postgresql://bob:s3cret@/db?host={tmp_path}&port=1&connect_timeout=2")
    with pytest.raises(BackendError) as e:
        await repo.list_sessions()
    assert "cannot connect to postgresql (" in str(e.value)
    assert "user=bob" in str(e.value) and "s3cret" not in str(e.value)
    assert isinstance(e.value.__cause__, psycopg.OperationalError)
    await repo.close()


async def test_a_host_paused_mid_commit_does_not_stop_the_other_writers(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host paused (SIGSTOP, a frozen VM) between a commit's first statement and its
    # COMMIT holds the session's row lock: the server ends its idle transaction after
    # IDLE_IN_TRANSACTION_TIMEOUT_MS (made short here), and the other hosts write on.
    monkeypatch.setattr(_postgres, "IDLE_IN_TRANSACTION_TIMEOUT_MS", 200, raising=False)
    paused_repo, other_repo = repo_for(postgres_url), repo_for(postgres_url)
    paused = await paused_repo.open_session("shared", create=True)
    await paused.commit([append_entry("before the pause")])
    other = await other_repo.open_session("shared")
    conn = paused._conn  # type: ignore[attr-defined]
    # What the paused host's commit had done when it stopped: the row lock taken.
    await conn.execute("BEGIN")
    await conn.execute("UPDATE sessions SET next_seq = next_seq WHERE name = 'shared'")
    # Before the server ended idle transactions this commit waited for as long as the
    # pause lasted (a commit is never abandoned half-way: pytest's timeout ended it).
    done = await other.commit([append_entry("while the other host is paused")])
    assert len(done.seqs) == 1
    entries = [e.value for e in await other.read_entries()]
    assert entries == ["before the pause", "while the other host is paused"]
    # The paused host finds its connection gone when it wakes: one clear error.
    with pytest.raises(BackendError, match="of session 'shared' failed on postgresql"):
        await paused.commit([append_entry("after the pause")])
    assert [e.value for e in await other.read_entries()] == entries
    await paused_repo.close()
    await other_repo.close()
