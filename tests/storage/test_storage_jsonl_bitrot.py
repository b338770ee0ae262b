"""JSONL records carry checksums: a torn tail (an interrupted write) is told apart from
damage to a committed record, and readers never change a file."""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolfold.storage import (
    CorruptStoreError,
    ReadOnlyError,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    open_repository,
)
from toolfold.storage._jsonl import JsonlRepository

OP = ephemeral_scope("op1")
PENDING = list_address("pending.tool_output", "op1:inv1", OP)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Path]:
    """A store with two sessions: ``a`` (three entries, one pending element) and ``b``."""
    directory = tmp_path / "store"
    repo = JsonlRepository(directory)
    try:
        a = await repo.open_session("a", create=True)
        for text in ("one", "two", "three"):
            await a.commit([append_entry(text)])
        await a.commit([append_list(PENDING, "pending")])
        b = await repo.open_session("b", create=True)
        await b.commit([append_entry("b's")])
    finally:
        await repo.close()
    yield directory


async def entries(directory: Path, name: str, *, read_only: bool) -> list[object]:
    repo = open_repository(f"jsonl:{directory}", read_only=read_only)
    try:
        s = await repo.open_session(name)
        return [e.value for e in await s.read_entries()]
    finally:
        await repo.close()


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("record", [1, 3])  # an interior record and the last one
async def test_a_changed_byte_in_a_committed_record_is_an_error_naming_file_and_offset(
    store: Path, record: int, read_only: bool
) -> None:
    main = store / "a.jsonl"
    data = bytearray(main.read_bytes())
    starts = [0, *[i + 1 for i, c in enumerate(data) if c == ord("\n")][:-1]]
    offset = starts[record]  # line 0 is the header
    at = data.index(b'"one"' if record == 1 else b'"three"', offset) + 2
    data[at] ^= 0x01  # one flipped bit, still valid JSON: only the checksum can tell
    main.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError) as info:
        await entries(store, "a", read_only=read_only)
    message = str(info.value)
    assert f"{main}: the record at byte {offset} (line {record + 1}) fails its checksum" in message
    assert (info.value.path, info.value.offset) == (str(main), offset)
    assert main.read_bytes() == bytes(data)  # nothing dropped, nothing truncated
    assert await entries(store, "b", read_only=read_only) == ["b's"]  # others stay readable


async def test_a_reader_leaves_a_torn_tail_on_disk_and_the_next_writer_drops_it(
    store: Path,
) -> None:
    main = store / "a.jsonl"
    torn = main.read_bytes() + b'["00000000",["e",9,"half'
    main.write_bytes(torn)
    repo = open_repository(f"jsonl:{store}", read_only=True)
    try:
        reader = await repo.open_session("a")
        assert [e.value for e in await reader.read_entries()] == ["one", "two", "three"]
        [note] = reader.notes
        assert str(main) in note and "incomplete" in note and "next writer drops it" in note
        with pytest.raises(ReadOnlyError, match="opened read-only"):
            await reader.commit([append_entry("no")])
    finally:
        await repo.close()
    assert main.read_bytes() == torn  # the reader changed nothing

    writer_repo = JsonlRepository(store)
    try:
        writer = await writer_repo.open_session("a")
        [note] = writer.notes
        assert f"at byte {len(torn) - 24}" in note and "dropped" in note
        await writer.commit([append_entry("four")])
    finally:
        await writer_repo.close()
    assert await entries(store, "a", read_only=True) == ["one", "two", "three", "four"]


async def test_a_nul_filled_last_line_is_a_torn_write_not_damage(store: Path) -> None:
    # What a file system leaves when it kept a write's last block but not its first.
    main = store / "a.jsonl"
    main.write_bytes(main.read_bytes() + b'["abcdef01",\x00\x00\x00\x00"x"]\n')
    repo = JsonlRepository(store)
    try:
        s = await repo.open_session("a")
        assert len(s.notes) == 1
        assert [e.value for e in await s.read_entries()] == ["one", "two", "three"]
    finally:
        await repo.close()


async def test_a_reader_opens_beside_the_writer_without_the_lock(store: Path) -> None:
    writer_repo = JsonlRepository(store)
    reader_repo = JsonlRepository(store, read_only=True)
    try:
        writer = await writer_repo.open_session("a")
        await writer.commit([append_entry("four")])
        reader = await reader_repo.open_session("a")
        assert [e.value for e in await reader.read_entries()][-1] == "four"
        assert await reader.read_list(PENDING) != []
        with pytest.raises(ReadOnlyError):
            await reader_repo.create_session("c")
        with pytest.raises(ReadOnlyError):
            await reader_repo.delete_session("b")
    finally:
        await reader_repo.close()
        await writer_repo.close()


async def test_version_1_files_are_read_and_appended_in_their_own_format(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    main = store / "old.jsonl"
    main.write_bytes(
        b'{"v":1,"kind":"session_header","sessionId":"0123456789abcdef0123456789abcdef"}\n'
        b'[["e",1,"from v1"]]\n'
    )
    repo = JsonlRepository(store)
    try:
        s = await repo.open_session("old")
        assert [e.value for e in await s.read_entries()] == ["from v1"]
        await s.commit([append_entry("appended")])
    finally:
        await repo.close()
    assert main.read_bytes().endswith(b'[["e",1,"from v1"]]\n[["e",2,"appended"]]\n')
    assert await entries(store, "old", read_only=True) == ["from v1", "appended"]


async def test_store_files_are_0600_and_directories_0700_whatever_the_umask(
    tmp_path: Path,
) -> None:
    old = os.umask(0)
    try:
        repo = JsonlRepository(tmp_path / "deep" / "store")
        try:
            s = await repo.open_session("a", create=True)
            await s.commit([append_list(PENDING, "pending")])
            await s.commit([append_entry("e")])
        finally:
            await repo.close()
    finally:
        os.umask(old)
    store = tmp_path / "deep" / "store"
    modes = {
        str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode)
        for p in [tmp_path / "deep", *sorted((tmp_path / "deep").rglob("*"))]
    }
    assert modes == {
        "deep": 0o700,
        "deep/store": 0o700,
        "deep/store/a.jsonl": 0o600,
        "deep/store/a.jsonl.scopes": 0o700,
        "deep/store/a.jsonl.scopes/scope-op1.scope": 0o600,
    }, modes
    assert store.is_dir()
