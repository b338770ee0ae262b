"""SQLite under faults: a damaged schema byte, a full disk, file modes, read-only opens."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tmpfs_fixture import fill, small_tmpfs
from toolfold.storage import (
    BackendError,
    CorruptStoreError,
    ReadOnlyError,
    StorageError,
    append_entry,
    open_repository,
)


async def make_store(path: Path, entries: list[str]) -> None:
    repo = open_repository(f"sqlite:{path}")
    try:
        s = await repo.open_session("s", create=True)
        for e in entries:
            await s.commit([append_entry(e)])
    finally:
        await repo.close()


async def read_entries(path: Path, *, read_only: bool) -> list[object]:
    repo = open_repository(f"sqlite:{path}", read_only=read_only)
    try:
        s = await repo.open_session("s")
        return [e.value for e in await s.read_entries()]
    finally:
        await repo.close()


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("name", [b"tabletoolfold_meta", b"tablesessionssessions"])
async def test_a_damaged_schema_byte_is_a_one_line_corrupt_error(
    tmp_path: Path, name: bytes, read_only: bool
) -> None:
    db = tmp_path / "s.db"
    await make_store(db, ["one"])
    data = bytearray(db.read_bytes())
    data[data.index(name) + 6] = 0xFF  # inside the table's name in sqlite_master
    db.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError) as info:
        await read_entries(db, read_only=read_only)
    message = str(info.value)
    assert "\n" not in message and str(db) in message and "not valid UTF-8" in message
    assert info.value.path == str(db)
    assert db.read_bytes() == bytes(data)  # nothing written to it


async def test_a_full_disk_is_a_backend_error_and_never_corruption(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "mnt") as mnt:
        db = mnt / "s.db"
        await make_store(db, ["one", "two"])
        filler = fill(mnt)
        assert os.statvfs(mnt).f_bavail == 0
        repo = open_repository(f"sqlite:{db}")
        try:
            with pytest.raises(StorageError) as info:
                s = await repo.open_session("s")
                await s.commit([append_entry("x" * 100_000)])
        finally:
            await repo.close()
        assert not isinstance(info.value, CorruptStoreError), info.value
        assert isinstance(info.value, BackendError)
        assert "disk is full" in str(info.value) and "\n" not in str(info.value)
        # A reader cannot even map SQLite's shared-memory index with no byte free: it
        # gets the same diagnosis, never "corrupt".
        with pytest.raises(BackendError, match="the disk is full"):
            await read_entries(db, read_only=True)
        filler.unlink()
        assert await read_entries(db, read_only=True) == ["one", "two"]
        repo = open_repository(f"sqlite:{db}")
        try:
            s = await repo.open_session("s")
            await s.commit([append_entry("three")])
        finally:
            await repo.close()
        assert await read_entries(db, read_only=True) == ["one", "two", "three"]


async def test_database_wal_and_shm_are_0600_and_the_directory_0700(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        repo = open_repository(f"sqlite:{tmp_path / 'new' / 's.db'}")
        try:
            s = await repo.open_session("s", create=True)
            await s.commit([append_entry("one")])
            # While the connection is open the WAL and its index exist.
            files = sorted(p.name for p in (tmp_path / "new").iterdir())
            modes = {n: stat.S_IMODE((tmp_path / "new" / n).stat().st_mode) for n in files}
        finally:
            await repo.close()
    finally:
        os.umask(old)
    assert modes == {"s.db": 0o600, "s.db-shm": 0o600, "s.db-wal": 0o600}
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700


async def test_a_read_only_repository_creates_and_writes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nothing" / "s.db"
    with pytest.raises(BackendError, match="no SQLite store at"):
        await read_entries(missing, read_only=True)
    assert not (tmp_path / "nothing").exists()
    db = tmp_path / "s.db"
    await make_store(db, ["one"])
    before = db.read_bytes()
    repo = open_repository(f"sqlite:{db}", read_only=True)
    try:
        s = await repo.open_session("s")
        with pytest.raises(ReadOnlyError):
            await s.commit([append_entry("no")])
        with pytest.raises(ReadOnlyError):
            await repo.open_session("t", create=True)
    finally:
        await repo.close()
    assert db.read_bytes() == before
