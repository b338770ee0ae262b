"""JSONL retirement edges: a side file whose unlink failed at retirement is retried, and
removed, when the session closes or when the scope id is used again; a reused id then
starts a fresh side file holding only the new lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from storage_faults import FlakyUnlink

from toolfold.storage import (
    ListElement,
    append_list,
    ephemeral_scope,
    list_address,
    retire_scope,
)
from toolfold.storage._jsonl import JsonlRepository, JsonlSession

OP = ephemeral_scope("op")
PENDING = list_address("pending", "p", OP)


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[JsonlRepository]:
    r = JsonlRepository(tmp_path / "store")
    try:
        yield r
    finally:
        await r.close()


async def session(repo: JsonlRepository) -> JsonlSession:
    s = await repo.open_session("s", create=True)
    assert isinstance(s, JsonlSession)
    return s


async def test_close_removes_a_side_file_whose_unlink_failed_at_retirement(
    repo: JsonlRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await session(repo)
    await s.commit([append_list(PENDING, "old")])
    side = s.side_path(OP)
    flaky = FlakyUnlink(monkeypatch, side)
    await s.commit([retire_scope(OP)])
    assert flaky.refused == 1 and side.exists()
    flaky.failing = False
    await s.close()
    assert not side.exists()


async def test_a_reused_scope_id_first_removes_the_file_of_its_retired_lifetime(
    repo: JsonlRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await session(repo)
    await s.commit([append_list(PENDING, "old"), append_list(PENDING, "older")])
    side = s.side_path(OP)
    flaky = FlakyUnlink(monkeypatch, side)
    await s.commit([retire_scope(OP)])
    assert flaky.refused == 1 and side.exists()
    flaky.failing = False
    r = await s.commit([append_list(PENDING, "new")])
    assert [e.value for e in await s.read_list(PENDING)] == ["new"]
    assert len(side.read_bytes().splitlines()) == 2  # a fresh file: header + the new record
    await s.close()
    assert side.exists()  # it holds the live lifetime
    s = await session(repo)
    assert await s.read_list(PENDING) == [ListElement(r.seqs[0], "new", None)]
    assert await s.live_scopes() == [OP]


async def test_a_reused_scope_id_whose_old_file_still_cannot_go_appends_after_it(
    repo: JsonlRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await session(repo)
    await s.commit([append_list(PENDING, "old")])
    side = s.side_path(OP)
    flaky = FlakyUnlink(monkeypatch, side)
    await s.commit([retire_scope(OP)])
    r = await s.commit([append_list(PENDING, "new")])
    assert flaky.refused == 2  # at the retirement and again at the reuse
    assert len(side.read_bytes().splitlines()) == 3  # header, the dead record, the new one
    flaky.failing = False
    await s.close()
    assert side.exists()  # the new lifetime is live: close leaves it
    s = await session(repo)
    assert await s.read_list(PENDING) == [ListElement(r.seqs[0], "new", None)]
