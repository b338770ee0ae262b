"""The JSONL repository's own refusals and housekeeping: what each failure to list,
open, read or delete a session file says (the path and the fix), that a delete is made
durable when the policy asks for it, and a delete of a session that never had a side
directory."""

from __future__ import annotations

import errno
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import toolfold.storage._jsonl as jsonl_repository
import toolfold.storage._jsonl_files as jsonl_files
from toolfold.storage import (
    BackendError,
    FsyncPolicy,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
)
from toolfold.storage._jsonl import JsonlRepository


@pytest.fixture
async def directory(tmp_path: Path) -> AsyncIterator[Path]:
    """A store holding session ``s`` (one entry, no side directory)."""
    d = tmp_path / "store"
    repo = JsonlRepository(d)
    try:
        s = await repo.open_session("s", create=True)
        await s.commit([append_entry("e")])
    finally:
        await repo.close()
    yield d


def repo_on(made: list[JsonlRepository], d: Path, **kwargs: Any) -> JsonlRepository:
    r = JsonlRepository(d, **kwargs)
    made.append(r)
    return r


async def test_listing_a_directory_that_is_a_file_names_it(
    tmp_path: Path, repos: list[JsonlRepository]
) -> None:
    (tmp_path / "file").write_text("not a directory")
    repo = repo_on(repos, tmp_path / "file")
    with pytest.raises(BackendError) as caught:
        await repo.list_sessions()
    assert str(caught.value).startswith(f"cannot list {tmp_path / 'file'} (")


async def test_a_reader_of_a_missing_session_names_the_file(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    repo = repo_on(repos, directory, read_only=True)
    with pytest.raises(SessionNotFoundError) as caught:
        await repo.open_session("nope")
    assert str(caught.value) == (
        f"no session 'nope' in jsonl:{directory} (no file {directory / 'nope.jsonl'})"
    )


@pytest.mark.parametrize("read_only", [True, False])
async def test_a_session_file_that_cannot_be_read_is_a_backend_error_naming_it(
    directory: Path, repos: list[JsonlRepository], read_only: bool
) -> None:
    (directory / "x.jsonl").mkdir()
    repo = repo_on(repos, directory, read_only=read_only)
    with pytest.raises(BackendError) as caught:
        await repo.open_session("x")
    what = "cannot read session 'x' from" if read_only else "cannot open"
    assert str(caught.value).startswith(f"{what} {directory / 'x.jsonl'} (")


async def test_following_a_session_file_that_cannot_be_read_names_it(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    (directory / "x.jsonl").mkdir()
    repo = repo_on(repos, directory)
    with pytest.raises(BackendError) as caught:
        await repo.wait_for_change("x", 0)
    assert str(caught.value).startswith(f"cannot read {directory / 'x.jsonl'} (")


async def test_deleting_a_session_without_a_side_directory(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    assert not (directory / "s.jsonl.scopes").exists()
    repo = repo_on(repos, directory)
    await repo.delete_session("s")
    assert await repo.list_sessions() == []
    assert sorted(os.listdir(directory)) == []


async def test_a_delete_is_synced_to_the_directory_when_the_policy_says_commit(
    directory: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(jsonl_repository, "_sync_dir", synced.append)
    repo = repo_on(repos, directory, fsync=FsyncPolicy(main="none", side="none"))
    s = await repo.open_session("t", create=True)
    await s.commit([append_entry("e")])
    await s.close()
    await repo.delete_session("t")
    assert synced == []
    await repo_on(repos, directory).delete_session("s")
    assert synced == [directory]  # the unlink, the delete's commit point, is durable


async def test_a_delete_that_cannot_open_or_unlink_the_file_names_it(
    directory: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    main = directory / "s.jsonl"
    loop = directory / "loop.jsonl"
    loop.symlink_to(loop)  # opening it fails with ELOOP, not "no such file"
    repo = repo_on(repos, directory)
    with pytest.raises(BackendError) as caught:
        await repo.delete_session("loop")
    assert str(caught.value).startswith(f"cannot open {loop} (")
    real = os.unlink

    def refuse(p: Any, *args: Any, **kwargs: Any) -> None:
        if os.fspath(p) == str(main):
            raise PermissionError(errno.EACCES, "simulated", str(main))
        real(p, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    with pytest.raises(BackendError) as caught:
        await repo.delete_session("s")
    assert str(caught.value).startswith(f"cannot delete {main} (")
    assert main.exists()


async def test_a_delete_while_another_writer_holds_the_session_names_the_file(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    holder = repo_on(repos, directory)
    s = await holder.open_session("s")
    await s.commit([append_list(list_address("ns", "l", ephemeral_scope("op")), 1)])
    with pytest.raises(StorageError) as caught:
        await repo_on(repos, directory).delete_session("s")
    assert str(caught.value) == (
        f"{directory / 's.jsonl'} is open in another repository object or process; "
        "JSONL sessions have one writer — close it there first"
    )


async def test_the_repository_names_its_location(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    assert repo_on(repos, directory).location == f"jsonl:{directory}"


async def test_creating_an_existing_session_names_it_and_the_store(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    repo = repo_on(repos, directory)
    with pytest.raises(SessionExistsError) as caught:
        await repo.create_session("s")
    assert str(caught.value) == f"session 's' already exists in jsonl:{directory}"


async def test_a_session_made_by_another_process_after_the_check_is_never_overwritten(
    directory: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    main = directory / "s.jsonl"
    before = main.read_bytes()
    real = Path.exists
    # The other process creates the file just after this one looked.
    monkeypatch.setattr(Path, "exists", lambda p: False if p == main else real(p))
    repo = repo_on(repos, directory)
    with pytest.raises(SessionExistsError) as caught:
        await repo.create_session("s")
    assert str(caught.value) == f"session 's' already exists in jsonl:{directory}"
    assert main.read_bytes() == before


async def test_a_session_file_that_cannot_be_created_names_it(
    directory: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "link", full)
    repo = repo_on(repos, directory)
    with pytest.raises(BackendError) as caught:
        await repo.create_session("x")
    assert str(caught.value).startswith(f"cannot create session file {directory / 'x.jsonl'} (")
    assert sorted(os.listdir(directory)) == ["s.jsonl"]  # no temp file left behind


async def test_opening_a_missing_session_says_how_to_create_it(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    repo = repo_on(repos, directory)
    with pytest.raises(SessionNotFoundError) as caught:
        await repo.open_session("nope")
    assert str(caught.value) == (
        f"no session 'nope' in jsonl:{directory} (no file {directory / 'nope.jsonl'}); "
        "create it first (create_session, or open_session(..., create=True))"
    )


async def test_a_session_deleted_between_the_check_and_the_open_is_not_found(
    directory: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = directory / "gone.jsonl"
    real = Path.exists
    monkeypatch.setattr(Path, "exists", lambda p: True if p == gone else real(p))
    repo = repo_on(repos, directory)
    with pytest.raises(SessionNotFoundError) as caught:
        await repo.open_session("gone")
    assert str(caught.value) == f"no session 'gone' in jsonl:{directory}"


async def test_opening_a_session_another_writer_holds_names_the_file(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    await repo_on(repos, directory).open_session("s")
    with pytest.raises(StorageError) as caught:
        await repo_on(repos, directory).open_session("s")
    assert str(caught.value) == (
        f"{directory / 's.jsonl'} is open in another repository object or process; "
        "JSONL sessions have one writer — close it there first"
    )


async def test_a_side_file_that_cannot_be_read_fails_the_open_and_releases_the_lock(
    directory: Path, repos: list[JsonlRepository]
) -> None:
    (directory / "s.jsonl.scopes" / "scope-op.scope").mkdir(parents=True)
    repo = repo_on(repos, directory)
    with pytest.raises(BackendError) as caught:
        await repo.open_session("s")
    assert str(caught.value).startswith(f"cannot read session 's' from {directory / 's.jsonl'} (")
    (directory / "s.jsonl.scopes" / "scope-op.scope").rmdir()
    s = await repo.open_session("s")  # the failed open let go of the file
    assert [e.value for e in await s.read_entries()] == ["e"]


async def test_creating_a_session_is_synced_when_the_policy_says_commit(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[Path] = []
    monkeypatch.setattr(jsonl_files, "_sync_dir", synced.append)
    await repo_on(repos, tmp_path, fsync=FsyncPolicy(main="none")).create_session("a")
    assert synced == []
    await repo_on(repos, tmp_path).create_session("b")
    assert synced == [tmp_path]
