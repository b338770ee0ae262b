"""Edges of a JSONL reader's ``refresh()``: files in the side directory that are not side
files, a retired lifetime whose side file could not be unlinked (its records stay dead,
refresh after refresh, and the id's next lifetime is read whole), and damage in a side
file the reader first meets at a refresh."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from storage_faults import FlakyUnlink

from toolfold.storage import (
    CorruptStoreError,
    ListElement,
    Repository,
    StorageError,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    open_repository,
    retire_scope,
)

OP = ephemeral_scope("op")
PENDING = list_address("pending", "p", OP)


@pytest.fixture
async def repos(tmp_path: Path) -> AsyncIterator[tuple[Repository, Repository]]:
    """A writer and a reader repository on one directory."""
    url = f"jsonl:{tmp_path / 'store'}"
    writer, reader = open_repository(url), open_repository(url, read_only=True)
    try:
        yield writer, reader
    finally:
        await writer.close()
        await reader.close()


async def test_files_in_the_side_directory_that_are_not_side_files_are_left_alone(
    repos: tuple[Repository, Repository],
) -> None:
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "one")])
    reader = await reader_repo.open_session("s")
    side_dir = Path(writer_repo.location[len("jsonl:") :]) / "s.jsonl.scopes"
    # A temp file (sorts first), a note, and names with only one half of a side file's.
    for name in (".scope-x.scope.0123.tmp", "notes.txt", "notes.scope", "scope-op.bak"):
        (side_dir / name).write_text("not a side file\n")
    r = await writer.commit([append_list(PENDING, "two")])
    await reader.refresh()
    assert [e.value for e in await reader.read_list(PENDING)] == ["one", "two"]
    assert reader.next_seq == r.seqs[0] + 1


async def test_a_retired_lifetime_stays_dead_in_a_reader_until_the_id_is_used_again(
    repos: tuple[Repository, Repository], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "old"), append_list(PENDING, "older")])
    reader = await reader_repo.open_session("s")
    side = Path(writer_repo.location[len("jsonl:") :]) / "s.jsonl.scopes" / "scope-op.scope"
    FlakyUnlink(monkeypatch, side)
    await writer.commit([retire_scope(OP)])
    assert side.exists()  # the unlink failed: the dead records are still on disk
    for n in range(3):  # refresh after refresh, with the dead file still there
        await reader.refresh()
        assert await reader.read_list(PENDING) == []
        assert await reader.live_scopes() == []
        await writer.commit([append_entry(n)])
        await reader.refresh()
        assert [e.value for e in await reader.read_entries()] == list(range(n + 1))
    monkeypatch.undo()
    # The id's next lifetime: the writer removes the dead file and starts a new one
    # (which may get the old file's inode number back).
    r = await writer.commit([append_list(PENDING, "new")])
    await reader.refresh()
    assert await reader.read_list(PENDING) == [ListElement(r.seqs[0], "new", None)]
    assert await reader.live_scopes() == [OP]
    r2 = await writer.commit([append_list(PENDING, "newer")])
    await reader.refresh()
    assert [e.seq for e in await reader.read_list(PENDING)] == [r.seqs[0], r2.seqs[0]]


async def test_damage_in_a_side_file_first_read_at_a_refresh_names_the_file(
    repos: tuple[Repository, Repository],
) -> None:
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_entry("e")])
    reader = await reader_repo.open_session("s")
    await writer.commit([append_list(PENDING, "one")])
    side = Path(writer_repo.location[len("jsonl:") :]) / "s.jsonl.scopes" / "scope-op.scope"
    with open(side, "ab") as f:
        f.write(b'["00000000",["e",9,"x"]]\n')
    with pytest.raises(CorruptStoreError) as caught:
        await reader.refresh()
    assert str(caught.value).startswith(f"{side}: the record at byte ")
    assert caught.value.path == str(side)


def side_of(repo: Repository, name: str = "op") -> Path:
    return Path(repo.location[len("jsonl:") :]) / "s.jsonl.scopes" / f"scope-{name}.scope"


async def test_damage_in_a_side_file_read_before_names_the_file(
    repos: tuple[Repository, Repository],
) -> None:
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "one")])
    reader = await reader_repo.open_session("s")
    side = side_of(writer_repo)
    at = side.stat().st_size
    with open(side, "ab") as f:
        f.write(b'["00000000",["e",9,"x"]]\n')
    with pytest.raises(CorruptStoreError) as caught:
        await reader.refresh()
    assert str(caught.value).startswith(f"{side}: the record at byte {at} (line 3) fails")
    assert caught.value.path == str(side)


async def test_a_side_file_unlinked_while_the_reader_lists_them_hides_no_other(
    repos: tuple[Repository, Repository], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer_repo, reader_repo = repos
    other = list_address("pending", "p", ephemeral_scope("zz"))  # sorts after "op"
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "one")])
    await writer.commit([append_list(other, "z1")])
    reader = await reader_repo.open_session("s")
    side = side_of(writer_repo)
    await writer.commit([append_list(other, "z2")])
    real_scandir = os.scandir

    def listed_then_unlinked(path: Any) -> Any:
        # The writer's retirement unlinks "op"'s file just after the reader listed it.
        with real_scandir(path) as it:
            entries = list(it)
        if os.fspath(path) == str(side.parent) and side.exists():
            side.unlink()
        return iter(entries)

    monkeypatch.setattr(os, "scandir", listed_then_unlinked)
    await reader.refresh()
    assert [e.value for e in await reader.read_list(other)] == ["z1", "z2"]


async def test_a_reader_whose_session_file_was_replaced_says_to_open_it_again(
    repos: tuple[Repository, Repository],
) -> None:
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_entry("e")])
    reader = await reader_repo.open_session("s")
    main = Path(writer_repo.location[len("jsonl:") :]) / "s.jsonl"
    await writer.close()
    with open(main, "rb"):  # held open: the new file cannot get the old inode number
        await writer_repo.delete_session("s")
        await writer_repo.create_session("s")
    with pytest.raises(StorageError) as caught:
        await reader.refresh()
    assert str(caught.value) == (
        f"{main} was replaced since this reader opened it (the session was deleted and "
        "made again?); open the session again"
    )


def inode_given_back(monkeypatch: pytest.MonkeyPatch, path: Path, ino: int) -> None:
    """Make ``os.fstat`` of the file now at ``path`` report inode number ``ino``: what a
    file system that hands a freed inode number out again (ext4 often does, at once)
    shows a reader."""
    real = os.fstat

    def fstat(fd: int) -> os.stat_result:
        st = real(fd)
        if os.readlink(f"/proc/self/fd/{fd}") != str(path):
            return st
        fields = list(st[:10])
        fields[1] = ino
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", fstat)


@pytest.mark.parametrize("new", ["longer " * 40, "new"])  # longer or shorter than the old
async def test_a_next_lifetime_with_the_old_inode_number_is_read_whole(
    repos: tuple[Repository, Repository], monkeypatch: pytest.MonkeyPatch, new: str
) -> None:
    # Read from where the reader stopped in the old file, the new one is garbage, or
    # nothing. Only the retirement, read in the same refresh after a session record,
    # tells the reader to forgive that and read the file whole.
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "old " * 20), append_list(PENDING, "older")])
    reader = await reader_repo.open_session("s")
    old_ino = side_of(writer_repo).stat().st_ino
    await writer.commit([append_entry("e")])
    await writer.commit([retire_scope(OP)])
    r = await writer.commit([append_list(PENDING, new)])
    inode_given_back(monkeypatch, side_of(writer_repo), old_ino)
    await reader.refresh()
    assert await reader.read_list(PENDING) == [ListElement(r.seqs[0], new, None)]
    assert [e.value for e in await reader.read_entries()] == ["e"]
    assert await reader.live_scopes() == [OP]


async def test_a_side_file_name_toolfold_never_gives_is_named_at_a_refresh(
    repos: tuple[Repository, Repository],
) -> None:
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "one")])
    reader = await reader_repo.open_session("s")
    odd = side_of(writer_repo).with_name("scope-%6Fp.scope")  # "op", not canonically encoded
    odd.write_bytes(side_of(writer_repo).read_bytes())
    with pytest.raises(CorruptStoreError) as caught:
        await reader.refresh()
    assert str(caught.value).startswith(f"{odd}: 'scope-%6Fp.scope' is not the name toolfold")
    assert caught.value.path == str(odd)


async def test_a_side_file_read_a_piece_at_a_time_and_then_retired(
    repos: tuple[Repository, Repository],
) -> None:
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "one")])
    reader = await reader_repo.open_session("s")
    await writer.commit([append_list(PENDING, "two")])
    await reader.refresh()  # reads the side file's new record only
    assert [e.value for e in await reader.read_list(PENDING)] == ["one", "two"]
    await writer.commit([retire_scope(OP)])
    await reader.refresh()
    assert await reader.read_list(PENDING) == [] and await reader.live_scopes() == []
    r = await writer.commit([append_list(PENDING, "three")])  # the next lifetime
    await reader.refresh()
    assert await reader.read_list(PENDING) == [ListElement(r.seqs[0], "three", None)]


@pytest.mark.parametrize("new", ["longer " * 40, "new"])  # longer or shorter than the old
async def test_a_dead_side_file_seen_at_open_does_not_lend_its_inode_to_the_next_lifetime(
    repos: tuple[Repository, Repository], monkeypatch: pytest.MonkeyPatch, new: str
) -> None:
    # The retirement's unlink failed, so the reader opens with the dead file in place. The
    # writer then reuses the id: the dead file goes and a fresh one is made, which may get
    # the dead one's inode number. No retirement is read at that refresh (it was read at
    # open), so only the dead file's own records can tell the reader to read it whole.
    writer_repo, reader_repo = repos
    writer = await writer_repo.open_session("s", create=True)
    await writer.commit([append_list(PENDING, "old " * 20)])
    side = side_of(writer_repo)
    flaky = FlakyUnlink(monkeypatch, side)
    await writer.commit([retire_scope(OP)])
    assert side.exists()  # dead: its only lifetime is retired
    reader = await reader_repo.open_session("s")
    old_ino = side.stat().st_ino
    flaky.failing = False
    r = await writer.commit([append_list(PENDING, new)])
    inode_given_back(monkeypatch, side, old_ino)
    await reader.refresh()
    assert await reader.read_list(PENDING) == [ListElement(r.seqs[0], new, None)]
    assert await reader.live_scopes() == [OP]
