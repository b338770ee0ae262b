"""``DeferredSession`` over real SQLite and JSONL stores: nothing is in the store until the
first commit, reads before it are empty and check their arguments like any session's, and
the first commit creates the session that everything after it reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfold.mcp._deferred import DeferredSession
from toolfold.storage import (
    ClosedError,
    StorageError,
    append_entry,
    list_address,
    open_repository,
    set_value,
    value,
)


@pytest.fixture(params=["sqlite", "jsonl"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'toolfold.db'}"
    (tmp_path / "jsonl").mkdir()
    return f"jsonl:{tmp_path / 'jsonl'}"


async def test_reads_before_the_first_commit_find_nothing_and_create_nothing(url: str) -> None:
    repo = open_repository(url)
    try:
        session = DeferredSession(repo, "later")
        assert await session.get_value(value("calls", "c1")) is None
        assert await session.scan_values("calls") == []
        assert await session.read_list(list_address("ops", "o1")) == []
        assert await session.read_entries() == []
        assert await session.count_entries() == 0
        assert await session.live_scopes() == []
        # Bad arguments get the same errors as from any session.
        with pytest.raises(StorageError, match="get_value needs a value"):
            await session.get_value("calls/c1")  # type: ignore[arg-type]
        with pytest.raises(StorageError, match="order must be"):
            await session.read_entries(order="up")  # type: ignore[arg-type]
        assert not session.created
        assert "later" not in await repo.list_sessions()
        await session.close()
        assert "later" not in await repo.list_sessions()
        with pytest.raises(ClosedError):
            await session.commit([set_value(value("calls", "c1"), 1)])
        assert "later" not in await repo.list_sessions()
    finally:
        await repo.close()


async def test_the_first_commit_creates_the_session_that_later_reads_see(url: str) -> None:
    repo = open_repository(url)
    try:
        session = DeferredSession(repo, "later")
        await session.commit([set_value(value("calls", "c1"), {"n": 1})])
        assert session.created
        assert "later" in await repo.list_sessions()
        await session.commit([append_entry({"text": "settled"})])
        assert await session.get_value(value("calls", "c1")) == {"n": 1}
        assert await session.scan_values("calls") == [("c1", {"n": 1})]
        assert [e.value for e in await session.read_entries()] == [{"text": "settled"}]
        assert session.next_seq == 3
        await session.close()
    finally:
        await repo.close()
    reopened = open_repository(url)
    try:
        stored = await reopened.open_session("later")
        assert await stored.get_value(value("calls", "c1")) == {"n": 1}
        assert await stored.count_entries() == 1
    finally:
        await reopened.close()


async def test_a_first_commit_across_scopes_creates_the_session_too(url: str) -> None:
    from toolfold.storage import ConflictError, ephemeral_scope, expect

    repo = open_repository(url)
    try:
        session = DeferredSession(repo, "later")
        token, start = value("lease.token", "op1"), value("op.meta", "op1", ephemeral_scope("op1"))
        await session.commit_across([set_value(token, 1)], [set_value(start, {"run_id": "r"})])
        assert session.created and await repo.list_sessions() == ["later"]
        assert await session.get_value(token) == 1
        assert await session.get_value(start) == {"run_id": "r"}
        with pytest.raises(ConflictError):
            await session.commit_across(
                [set_value(token, 2)], [set_value(start, "x")], expect=[expect(token, None)]
            )
        assert await session.get_value(start) == {"run_id": "r"}
        await session.close()
    finally:
        await repo.close()
