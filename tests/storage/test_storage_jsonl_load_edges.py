"""What a JSONL session's open does with the side directory beyond its own side files:
notes, editor backups and hidden files are left alone (only its own temp files are
swept), a side file unlinked while a reader lists them hides no other, a descriptor
that fails to close does not fail the session's close, and the longest scope id still
fits its side file's temp name."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
from storage_faults import FlakyUnlink

from toolfold.storage import append_list, ephemeral_scope, list_address, retire_scope
from toolfold.storage._addresses import MAX_ENCODED_SCOPE_ID
from toolfold.storage._jsonl import JsonlRepository, JsonlSession

A = list_address("ns", "l", ephemeral_scope("a"))
Z = list_address("ns", "l", ephemeral_scope("zz"))  # its side file sorts after a's

FOREIGN = [".notes", "backup.tmp", "a-note.txt", "notes.scope", "scope-a.bak"]


async def open_session(
    repos: list[JsonlRepository], directory: Path, *, read_only: bool = False
) -> JsonlSession:
    repo = JsonlRepository(directory, read_only=read_only)
    repos.append(repo)
    s = await repo.open_session("s", create=not read_only)
    assert isinstance(s, JsonlSession)
    return s


@pytest.mark.parametrize("read_only", [False, True])
async def test_files_in_the_side_directory_that_are_not_ours_are_left_alone(
    tmp_path: Path, repos: list[JsonlRepository], read_only: bool
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(A, 1)])
    await s.commit([append_list(Z, 2)])
    await s.close()
    side_dir = tmp_path / "s.jsonl.scopes"
    for name in FOREIGN:
        (side_dir / name).write_text("not toolfold's")
    (side_dir / ".scope-a.scope.0123456789ab.tmp").write_text("a temp file of ours")
    s = await open_session(repos, tmp_path, read_only=read_only)
    assert [e.value for e in await s.read_list(A)] == [1]
    assert [e.value for e in await s.read_list(Z)] == [2]
    left = sorted(os.listdir(side_dir))
    ours = ["scope-a.scope", "scope-zz.scope"]
    swept = [] if not read_only else [".scope-a.scope.0123456789ab.tmp"]
    assert left == sorted([*FOREIGN, *ours, *swept])


async def test_a_side_file_unlinked_while_a_reader_opens_hides_no_other(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(A, 1)])
    await s.commit([append_list(Z, 2)])
    side_a = s.side_path(A.scope)
    real = os.scandir

    def listed_then_unlinked(path: Any) -> Any:
        # The writer retires scope a and unlinks its file just after the reader listed it.
        with real(path) as it:
            entries = list(it)
        if os.fspath(path) == str(side_a.parent) and side_a.exists():
            side_a.unlink()
        return iter(entries)

    monkeypatch.setattr(os, "scandir", listed_then_unlinked)
    reader = await open_session(repos, tmp_path, read_only=True)
    assert [e.value for e in await reader.read_list(Z)] == [2]


async def test_a_descriptor_that_fails_to_close_does_not_fail_the_close(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(A, 1)])
    fd = s._sides[A.scope].fd
    assert fd is not None
    real = os.close

    def close(n: int) -> None:
        real(n)
        if n == fd:
            raise OSError(errno.EIO, "Input/output error")  # after closing: no leak

    monkeypatch.setattr(os, "close", close)
    await s.close()
    monkeypatch.undo()
    s = await open_session(repos, tmp_path)
    assert [e.value for e in await s.read_list(A)] == [1]


async def test_the_longest_scope_id_gets_a_side_file(
    tmp_path: Path, repos: list[JsonlRepository]
) -> None:
    longest = list_address("ns", "l", ephemeral_scope("a" * MAX_ENCODED_SCOPE_ID))
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(longest, 1)])
    await s.close()
    s = await open_session(repos, tmp_path)
    assert [e.value for e in await s.read_list(longest)] == [1]


async def test_a_dead_side_file_removed_at_open_leaves_the_live_ones_known(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(A, "dead")])
    await s.commit([append_list(Z, "z1")])
    FlakyUnlink(monkeypatch, s.side_path(A.scope))
    await s.commit([retire_scope(A.scope)])
    await s.close()
    monkeypatch.undo()
    s = await open_session(repos, tmp_path)  # unlinks a's dead file, keeps zz's
    assert not s.side_path(A.scope).exists()
    r = await s.commit([append_list(Z, "z2")])
    await s.close()
    s = await open_session(repos, tmp_path)
    assert [(e.seq, e.value) for e in await s.read_list(Z)] == [(2, "z1"), (r.seqs[0], "z2")]


async def test_a_temp_file_that_cannot_be_swept_does_not_fail_the_open(
    tmp_path: Path, repos: list[JsonlRepository], monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await open_session(repos, tmp_path)
    await s.commit([append_list(A, 1)])
    await s.close()
    temp = tmp_path / "s.jsonl.scopes" / ".scope-a.scope.0123456789ab.tmp"
    temp.write_text("left by a crash")
    FlakyUnlink(monkeypatch, temp)
    s = await open_session(repos, tmp_path)
    assert [e.value for e in await s.read_list(A)] == [1]
    assert temp.exists()  # tried again at the next open
