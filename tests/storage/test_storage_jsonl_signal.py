"""The JSONL change signal's file signature (``JsonlRepository._signature``): what another
process's commit changes, what a quiet session costs (stats, no directory listing), and
the "racy" listing a file made in the directory's mtime tick must not hide behind.

The clock the racy rule reads is replaced where an edge is pinned, and directory mtimes
are set explicitly, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfold.storage import append_entry, append_list, ephemeral_scope, list_address
from toolfold.storage._jsonl import JsonlRepository, JsonlSession

A = list_address("ns", "l", ephemeral_scope("a"))
B = list_address("ns", "l", ephemeral_scope("b"))
SECOND = 1_000_000_000
LONG_AGO = 1_000_000_000 * SECOND  # 2001: a directory mtime far older than the racy second

Listings = dict[str, tuple[tuple[int, int], list[str]]]


@pytest.fixture
async def writer(tmp_path: Path) -> AsyncIterator[tuple[JsonlRepository, JsonlSession]]:
    """Session ``s`` with two live side files (scopes ``a`` and ``b``)."""
    repo = JsonlRepository(tmp_path / "store")
    try:
        s = await repo.open_session("s", create=True)
        assert isinstance(s, JsonlSession)
        await s.commit([append_list(A, 1)])
        await s.commit([append_list(B, 2)])
        yield repo, s
    finally:
        await repo.close()


@pytest.fixture
def scandirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The directories listed with ``os.scandir`` while the test runs."""
    real = os.scandir
    calls: list[str] = []

    def counting(path: Any) -> Any:
        calls.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", counting)
    yield calls


def side_dir(repo: JsonlRepository) -> Path:
    return repo.directory / "s.jsonl.scopes"


def age(path: Path, mtime_ns: int = LONG_AGO) -> None:
    os.utime(path, ns=(mtime_ns, mtime_ns))


def clock(monkeypatch: pytest.MonkeyPatch, now_ns: int) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: now_ns)


async def test_a_quiet_session_keeps_its_signature_and_costs_no_listing(
    writer: tuple[JsonlRepository, JsonlSession], scandirs: list[str]
) -> None:
    repo, _ = writer
    age(side_dir(repo))
    listings: Listings = {}
    first = repo._signature("s", listings)
    assert first is not None and len(first) == 3 * 3  # main log + two side files
    assert scandirs == [str(side_dir(repo))]
    for _ in range(3):
        assert repo._signature("s", listings) == first
    assert len(scandirs) == 1  # the listing was reused: stats only


async def test_a_commit_to_the_main_log_beside_live_side_files_changes_the_signature(
    writer: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, s = writer
    listings: Listings = {}
    before = repo._signature("s", listings)
    await s.commit([append_entry("main")])
    assert repo._signature("s", listings) != before


async def test_a_commit_to_a_side_file_changes_the_signature(
    writer: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, s = writer
    age(side_dir(repo))
    listings: Listings = {}
    before = repo._signature("s", listings)
    await s.commit([append_list(B, 3)])  # an append: the directory is not touched
    assert repo._signature("s", listings) != before


async def test_files_in_the_side_directory_that_are_not_side_files_do_not_count(
    writer: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, _ = writer
    notes, stray = side_dir(repo) / "notes.scope", side_dir(repo) / "scope-a.bak"
    notes.write_text("a note")
    stray.write_text("an editor backup")
    listings: Listings = {}
    before = repo._signature("s", listings)
    assert before is not None and len(before) == 3 * 3
    notes.write_text("a longer note")
    stray.write_text("a longer editor backup")
    assert repo._signature("s", listings) == before


async def test_a_side_file_made_after_the_listing_is_seen_once_the_directory_moved(
    writer: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, s = writer
    age(side_dir(repo))
    listings: Listings = {}
    before = repo._signature("s", listings)
    await s.commit([append_list(list_address("ns", "l", ephemeral_scope("c")), 3)])
    # The directory's mtime moved, but not within the last second.
    age(side_dir(repo), LONG_AGO + SECOND)
    after = repo._signature("s", listings)
    assert after is not None and before is not None and len(after) == len(before) + 3


async def test_a_listing_within_a_second_of_the_directory_mtime_is_not_reused(
    writer: tuple[JsonlRepository, JsonlSession], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The racy case: a side file made in the same clock tick as the listing leaves the
    # directory's mtime as it was.
    repo, s = writer
    tick = LONG_AGO
    age(side_dir(repo), tick)
    clock(monkeypatch, tick + SECOND - 1)
    listings: Listings = {}
    before = repo._signature("s", listings)
    await s.commit([append_list(list_address("ns", "l", ephemeral_scope("c")), 3)])
    age(side_dir(repo), tick)
    after = repo._signature("s", listings)
    assert after is not None and before is not None and len(after) == len(before) + 3


async def test_a_listing_a_second_or_more_after_the_directory_mtime_is_reused(
    writer: tuple[JsonlRepository, JsonlSession],
    monkeypatch: pytest.MonkeyPatch,
    scandirs: list[str],
) -> None:
    repo, _ = writer
    tick = LONG_AGO
    age(side_dir(repo), tick)
    clock(monkeypatch, tick + SECOND)
    listings: Listings = {}
    before = repo._signature("s", listings)
    assert repo._signature("s", listings) == before
    assert len(scandirs) == 1


async def test_a_side_file_gone_from_a_reused_listing_does_not_hide_the_files_after_it(
    writer: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, s = writer
    age(side_dir(repo))
    listings: Listings = {}
    repo._signature("s", listings)
    # Scope a's file vanishes behind the cached listing (the directory mtime put back).
    s.side_path(A.scope).unlink()
    age(side_dir(repo))
    gone = repo._signature("s", listings)
    assert gone is not None and len(gone) == 3 + 1 + 3
    await s.commit([append_list(B, 3)])  # b's file sorts after a's
    assert repo._signature("s", listings) != gone


async def test_a_side_directory_removed_while_listing_leaves_the_main_log(
    writer: tuple[JsonlRepository, JsonlSession], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, s = writer
    real = os.scandir

    def vanished(path: Any) -> Any:
        if os.fspath(path) == str(side_dir(repo)):
            raise FileNotFoundError(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", vanished)
    st = s.main_path.stat()
    assert repo._signature("s", {}) == (st.st_ino, st.st_size, st.st_mtime_ns)


async def test_a_deleted_session_has_no_signature(
    writer: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, _ = writer
    assert repo._signature("nope", {}) is None
    assert repo._signature("s", {}) is not None


# -- which waited sessions moved (``_moved``, one round of the watcher) --------------------


@pytest.fixture
async def two_sessions(tmp_path: Path) -> AsyncIterator[tuple[JsonlRepository, JsonlSession]]:
    """Sessions ``a`` (one entry) and ``b`` (one entry and a live side file)."""
    repo = JsonlRepository(tmp_path / "store")
    try:
        a = await repo.open_session("a", create=True)
        await a.commit([append_entry("a")])
        b = await repo.open_session("b", create=True)
        assert isinstance(b, JsonlSession)
        await b.commit([append_entry("b")])
        await b.commit([append_list(A, 1)])
        yield repo, b
    finally:
        await repo.close()


async def test_a_round_reports_the_sessions_that_moved_and_only_those(
    two_sessions: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, b = two_sessions
    seen: dict[str, tuple[int, ...] | None] = {}
    listings: Listings = {}
    # The first round has nothing to compare with: every session counts as moved.
    assert repo._moved(["a", "b"], seen, listings) == [("a", 1), ("b", 2)]
    assert repo._moved(["a", "b"], seen, listings) == []  # nothing committed since
    # A quiet session listed first does not stop the round from looking at the next.
    await b.commit([append_entry("more")])
    assert repo._moved(["a", "b"], seen, listings) == [("b", 3)]
    assert repo._moved(["a", "b"], seen, listings) == []


async def test_a_session_no_longer_waited_for_is_forgotten(
    two_sessions: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, _ = two_sessions
    seen: dict[str, tuple[int, ...] | None] = {}
    listings: Listings = {}
    repo._moved(["a", "b"], seen, listings)
    assert set(seen) == {"a", "b"} and set(listings) == {"b"}
    assert repo._moved(["a"], seen, listings) == []
    assert set(seen) == {"a"} and listings == {}


async def test_a_session_that_cannot_be_read_does_not_stop_the_round(
    two_sessions: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, _ = two_sessions
    (repo.directory / "broken.jsonl").mkdir()  # stats fine; reading it fails
    seen: dict[str, tuple[int, ...] | None] = {}
    assert repo._moved(["broken", "b"], seen, {}) == [("b", 2)]


async def test_files_in_the_side_directory_that_are_not_side_files_do_not_raise_the_high_water(
    writer: tuple[JsonlRepository, JsonlSession],
) -> None:
    repo, s = writer
    record = b'{"kind":"note"}\n[["e",99,"x"]]\n'  # reads like a record line with seq 99
    (side_dir(repo) / "notes.scope").write_bytes(record)
    (side_dir(repo) / "scope-a.bak").write_bytes(record)
    assert s.next_seq == 3
    assert await repo.wait_for_change("s", 0) == 2
