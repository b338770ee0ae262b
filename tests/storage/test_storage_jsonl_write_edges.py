"""Edges of a JSONL writer's appends: which files a commit syncs under each fsync policy,
a failed append to a side file taken back to the byte, a file whose failed append could
not be taken back refusing further commits with the reason, and a side file made over
the dead one a failed unlink left behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

import toolfold.storage._jsonl_files as jsonl_files
import toolfold.storage._jsonl_session as jsonl_session
from toolfold.storage import (
    BackendError,
    FsyncPolicy,
    ListElement,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    retire_scope,
)
from toolfold.storage._jsonl import JsonlRepository, JsonlSession

OP = ephemeral_scope("op")
PENDING = list_address("pending", "p", OP)


async def open_session(
    repos: list[JsonlRepository], directory: Path, policy: FsyncPolicy | None = None
) -> JsonlSession:
    repo = JsonlRepository(directory, fsync=policy)
    repos.append(repo)
    s = await repo.open_session("s", create=True)
    assert isinstance(s, JsonlSession)
    return s


class Syncs:
    """What a test's commits force to disk: data syncs by file, directory syncs."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.files: list[str] = []
        self.dirs: list[Path] = []
        real = jsonl_files._datasync

        def datasync(fd: int) -> None:
            self.files.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
            real(fd)

        monkeypatch.setattr(jsonl_session, "_datasync", datasync)
        monkeypatch.setattr(jsonl_session, "_sync_dir", self.dirs.append)
        monkeypatch.setattr(jsonl_files, "_sync_dir", self.dirs.append)


@pytest.mark.parametrize("main", ["commit", "none"])
@pytest.mark.parametrize("side", ["commit", "none"])
async def test_each_file_is_synced_as_its_policy_says(
    tmp_path: Path,
    repos: list[JsonlRepository],
    monkeypatch: pytest.MonkeyPatch,
    main: str,
    side: str,
) -> None:
    policy = FsyncPolicy(main=main, side=side)  # type: ignore[arg-type]
    s = await open_session(repos, tmp_path, policy)
    syncs = Syncs(monkeypatch)
    await s.commit([append_list(PENDING, 1)])  # makes the side directory and file
    await s.commit([append_list(PENDING, 2)])
    await s.commit([append_entry("e")])
    side_dir = tmp_path / "s.jsonl.scopes"
    # The first commit of a scope is in the file its rename puts in place (synced with
    # it, below); only the second one is an append of its own.
    expected_files = ["scope-op.scope"] if side == "commit" else []
    expected_files += ["s.jsonl"] if main == "commit" else []
    assert syncs.files == expected_files
    # A new side file is durable with its directory entry, and the directory with its own.
    assert syncs.dirs == ([tmp_path, side_dir] if side == "commit" else [])


async def test_a_failed_append_to_a_side_file_is_taken_back_to_the_byte(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(PENDING, "one")])  # the side file is made here
    side = s.side_path(OP)
    before = side.read_bytes()
    real_write = os.write

    def half_then_fail(fd: int, data: Any) -> int:
        if os.readlink(f"/proc/self/fd/{fd}") == str(side):
            monkeypatch.setattr(os, "write", full)
            return real_write(fd, bytes(data)[: len(data) // 2])
        return real_write(fd, data)

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_fail)
    with pytest.raises(BackendError, match="was not committed"):
        await s.commit([append_list(PENDING, "lost " * 10)])
    assert side.read_bytes() == before
    monkeypatch.setattr(os, "write", real_write)
    r = await s.commit([append_list(PENDING, "two")])
    await s.close()
    s = await open_session(repos, tmp_path)
    assert [e.value for e in await s.read_list(PENDING)] == ["one", "two"]
    assert (await s.read_list(PENDING))[-1].seq == r.seqs[0]


async def test_a_file_whose_failed_append_could_not_be_taken_back_refuses_commits(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_entry("one")])
    main = s.main_path

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def stuck(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", full)
    monkeypatch.setattr(os, "ftruncate", stuck)
    with pytest.raises(BackendError, match="was not committed"):
        await s.commit([append_entry("lost")])
    monkeypatch.undo()
    with pytest.raises(BackendError) as caught:
        await s.commit([append_entry("refused")])
    assert str(caught.value) == (
        f"{main}: an earlier write failed ([Errno 28] No space left on device) and its "
        "partial line could not be removed ([Errno 5] Input/output error); close and "
        "reopen the session (reopen drops the torn line)"
    )
    # The other files still take commits.
    await s.commit([append_list(PENDING, "side")])


async def test_a_side_file_is_made_over_a_dead_one_a_failed_unlink_left(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(PENDING, "old")])
    side = s.side_path(OP)
    real = os.unlink

    def refuse(p: Any, *args: Any, **kwargs: Any) -> None:
        if os.fspath(p) == str(side):
            raise PermissionError(errno.EACCES, "simulated", str(side))
        real(p, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refuse)
    await s.commit([retire_scope(OP)])
    await s.close()
    s = await open_session(repos, tmp_path)  # its repair cannot unlink the dead file either
    assert side.exists() and await s.live_scopes() == []
    r = await s.commit([append_list(PENDING, "new")])
    assert len(side.read_bytes().splitlines()) == 2  # a new file: header + the new record
    monkeypatch.undo()
    await s.close()
    s = await open_session(repos, tmp_path)
    assert await s.read_list(PENDING) == [ListElement(r.seqs[0], "new", None)]


async def test_a_side_file_that_cannot_be_made_fails_the_commit_and_names_it(
    tmp_path: Path, repos: list[JsonlRepository]
) -> None:
    s = await open_session(repos, tmp_path)
    (tmp_path / "s.jsonl.scopes").write_text("a file where the side directory goes")
    with pytest.raises(BackendError) as caught:
        await s.commit([append_list(PENDING, "one")])
    assert str(caught.value).startswith(f"cannot open {s.side_path(OP)} for writing (")
    assert str(caught.value).endswith("; nothing was committed")
    assert await s.read_list(PENDING) == []
