"""JSONL backend under faults: torn tails, damage, foreign side files, crashes around
retirement, failing unlinks and writes, and scope-id reuse racing the cleanup."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from toolfold.storage import (
    SESSION,
    BackendError,
    CorruptStoreError,
    Entry,
    FsyncPolicy,
    ListElement,
    Session,
    StorageError,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._jsonl import JsonlRepository, JsonlSession
from toolfold.storage._jsonl_files import _frame

OP = ephemeral_scope("op 1/é")
PENDING = list_address("pending.tool_output", "op1:inv1", OP)
MEMO = value("op.tool_memo", "op1:inv1:step", OP)
HIST = list_address("hist", "h")


class Env:
    """One JSONL directory; sessions opened from fresh repository objects."""

    def __init__(self, directory: Path, policy: FsyncPolicy | None = None) -> None:
        self.dir = directory
        self.policy = policy
        self.repos: list[JsonlRepository] = []

    def repo(self) -> JsonlRepository:
        r = JsonlRepository(self.dir, fsync=self.policy)
        self.repos.append(r)
        return r

    async def open(self, name: str = "s") -> JsonlSession:
        s = await self.repo().open_session(name, create=True)
        assert isinstance(s, JsonlSession)
        return s

    async def reopen(self, s: Session) -> JsonlSession:
        await s.close()
        return await self.open(s.name)

    async def aclose(self) -> None:
        for r in self.repos:
            await r.close()


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e = Env(tmp_path / "store")
    try:
        yield e
    finally:
        await e.aclose()


async def state(s: Session) -> dict[str, Any]:
    """Everything observable that these tests write."""
    return {
        "next_seq": s.next_seq,
        "live": await s.live_scopes(),
        "hist": await s.read_list(HIST),
        "pending": await s.read_list(PENDING),
        "memo": await s.get_value(MEMO),
        "entries": await s.read_entries(),
        "values": await s.scan_values("ns"),
    }


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


# -- torn final line ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["main", "side"])
async def test_torn_final_line_at_every_byte_offset(env: Env, where: str) -> None:
    s = await env.open()
    await s.commit([append_list(HIST, {"n": i}) for i in range(3)])
    await s.commit([set_value(value("ns", "k"), "kept"), append_entry({"e": 1})])
    await s.commit([append_list(PENDING, ["base"], tag="base"), set_value(MEMO, 1)])
    await s.commit([append_list(PENDING, ["delta", 1])])
    before = await state(s)
    high = s.next_seq - 1
    # the record to tear: the last line of the chosen file
    if where == "main":
        await s.commit([append_list(HIST, {"torn": "ü" * 5}), append_entry({"torn": True})])
        path = s.main_path
    else:
        await s.commit([append_list(PENDING, ["torn", "ü" * 5]), set_value(MEMO, 2)])
        path = s.side_path(OP)
    await s.close()
    saved = {p: p.read_bytes() for p in (s.main_path, s.side_path(OP))}
    full = saved[path]
    last_start = full.rstrip(b"\n").rfind(b"\n") + 1
    assert len(full) - last_start > 20
    for cut in range(last_start, len(full)):  # every prefix of the record, newline excluded
        for p, data in saved.items():
            p.write_bytes(data)
        path.write_bytes(full[:cut])
        s = await env.open()
        after = await state(s)
        assert after == {**before, "next_seq": high + 1}, f"cut at byte {cut}"
        r = await s.commit([append_list(HIST, "next"), append_entry("next")])
        assert r.seqs == (high + 1, high + 2)  # above every surviving seq
        # the torn bytes were cut away before the append: the file is well-formed
        for p in saved:
            assert p.read_bytes().endswith(b"\n") and b"torn" not in p.read_bytes()
        s = await env.reopen(s)
        assert (await s.read_list(HIST))[-1].value == "next"
        assert (await s.read_entries())[-1].value == "next"
        await s.close()


async def test_unparsable_last_line_with_newline_is_dropped(env: Env) -> None:
    s = await env.open()
    await s.commit([append_entry("a")])
    await s.close()
    with open(s.main_path, "ab") as f:
        f.write(b'[["e",2,"half\x00\x00\x00\n')  # a partly persisted write
    s = await env.open()
    assert [e.value for e in await s.read_entries()] == ["a"]
    await s.commit([append_entry("b")])
    s = await env.reopen(s)
    assert [e.value for e in await s.read_entries()] == ["a", "b"]


# -- damage -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("garbage", "expect"),
    [
        # Lines without a valid checksum: damage to a committed record.
        (b"this is not json\n", "fails its checksum"),
        (b"\n", "fails its checksum"),
        (b'[["e",3,"x"]]\n', "fails its checksum"),  # a version 1 line in a version 2 file
        # Lines with a valid checksum that still are not what our writer produces.
        (_frame(b"[oops]\n"), "line 3 (byte 119) is not valid JSON"),
        (_frame(b'[["?",0,3]]\n'), "unknown record verb '?'"),
        (_frame(b'[["l",7,3,"x"]]\n'), "address id 7 is used but was never defined"),
        (_frame(b'[["l",["hist","h"],1,"x"]]\n'), "has seq 1 after seq 1"),
        (_frame(b'[{"kind":"session_header"}]\n'), "got {'kind': 'session_header'}"),
    ],
)
async def test_malformed_interior_line_fails_clearly_and_touches_nothing(
    env: Env, garbage: bytes, expect: str
) -> None:
    s = await env.open()
    await s.commit([append_list(HIST, "one")])
    await s.commit([append_list(HIST, "two")])
    await s.commit([append_list(PENDING, "side")])
    await s.close()
    ls = lines(s.main_path)
    damaged = b"".join([*ls[:2], garbage, *ls[2:]])
    s.main_path.write_bytes(damaged)
    side_before = s.side_path(OP).read_bytes()
    with pytest.raises(CorruptStoreError) as info:
        await env.open()
    msg = str(info.value)
    assert str(s.main_path) in msg and "line 3" in msg and expect in msg
    assert info.value.path == str(s.main_path) and info.value.record == 3
    assert s.main_path.read_bytes() == damaged  # nothing repaired, nothing lost
    assert s.side_path(OP).read_bytes() == side_before
    # the session can be opened again once the line is cut out by hand
    s.main_path.write_bytes(b"".join(ls))
    s = await env.open()
    assert [e.value for e in await s.read_list(HIST)] == ["one", "two"]


async def test_damaged_side_file_names_the_file(env: Env) -> None:
    s = await env.open()
    await s.commit([append_list(PENDING, "a")])
    await s.commit([append_list(PENDING, "b")])
    await s.close()
    side = s.side_path(OP)
    ls = lines(side)
    side.write_bytes(ls[0] + b"garbage\n" + b"".join(ls[1:]))
    with pytest.raises(
        CorruptStoreError, match=r"scope-op%201%2F%C3%A9\.scope: the record at byte \d+ \(line 2\)"
    ):
        await env.open()


async def test_unknown_format_version_is_refused(env: Env) -> None:
    s = await env.open()
    await s.close()
    data = s.main_path.read_bytes().replace(b'"v":2', b'"v":9', 1)
    s.main_path.write_bytes(data)
    with pytest.raises(CorruptStoreError, match="format version 9 is not supported"):
        await env.open()


async def test_duplicate_seq_across_files_is_corruption(env: Env) -> None:
    s = await env.open()
    await s.commit([append_list(HIST, "main")])  # seq 1
    await s.commit([append_list(PENDING, "side")])  # seq 2
    await s.close()
    side = s.side_path(OP)
    header, record = lines(side)
    # Edited with its checksum recomputed: only the seq check can catch it.
    edited = _frame(b"[" + record[len('["01234567",') :].replace(b",2,", b",1,"))
    side.write_bytes(header + edited)
    with pytest.raises(CorruptStoreError, match="seq 1 appears twice") as info:
        await env.open()
    assert str(s.main_path) in str(info.value) and str(side) in str(info.value)


# -- foreign and renamed side files -----------------------------------------------------


async def test_side_file_from_another_session_is_refused(env: Env) -> None:
    a = await env.open("a")
    await a.commit([append_list(PENDING, "a's data")])
    await a.close()
    b = await env.open("b")
    await b.commit([append_entry("b's history")])
    await b.close()
    foreign = b.side_path(OP)
    foreign.parent.mkdir()
    foreign.write_bytes(a.side_path(OP).read_bytes())
    main_before = b.main_path.read_bytes()
    with pytest.raises(CorruptStoreError, match="belongs to session id") as info:
        await env.open("b")
    assert str(foreign) in str(info.value) and "another session" in str(info.value)
    assert foreign.read_bytes() == a.side_path(OP).read_bytes()  # left for the user
    assert b.main_path.read_bytes() == main_before


async def test_renamed_side_file_is_an_identity_mismatch(env: Env) -> None:
    s = await env.open()
    await s.commit([append_list(PENDING, "x")])
    await s.close()
    other = s.side_path(ephemeral_scope("op2"))
    s.side_path(OP).rename(other)
    with pytest.raises(CorruptStoreError, match=r"header names scope 'op 1/é'.*says 'op2'"):
        await env.open()


async def test_non_canonical_side_file_name_is_refused(env: Env) -> None:
    s = await env.open()
    await s.commit([append_list(PENDING, "x")])
    await s.close()
    s.side_path(OP).rename(s.side_path(OP).with_name("scope-op 1.scope"))
    with pytest.raises(CorruptStoreError, match="not canonically percent-encoded"):
        await env.open()


# -- retirement, crashes and unlink failures ------------------------------------------


def failing_unlink(monkeypatch: pytest.MonkeyPatch, target: Callable[[str], bool]) -> list[str]:
    """Make os.unlink fail (EACCES) for paths where ``target`` is true; return the calls."""
    real = os.unlink
    calls: list[str] = []

    def fake(path: Any, *args: Any, **kwargs: Any) -> None:
        if target(os.fspath(path)):
            calls.append(os.fspath(path))
            raise PermissionError(errno.EACCES, "simulated", os.fspath(path))
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", fake)
    return calls


async def test_crash_between_retirement_and_unlink(env: Env) -> None:
    s = await env.open()
    await s.commit([append_list(PENDING, ["base"], tag="base"), set_value(MEMO, "m")])
    side = s.side_path(OP)
    saved = side.read_bytes()
    await s.commit([append_entry({"result": "ok"}), retire_scope(OP)])
    await s.close()
    assert not side.exists()
    # the crash: the retirement is in the main log, the side file was never unlinked
    side.write_bytes(saved)
    s = await env.open()
    assert await state(s) == {
        "next_seq": 5,
        "live": [],
        "hist": [],
        "pending": [],
        "memo": None,
        "entries": [Entry(3, {"result": "ok"})],
        "values": [],
    }
    assert not side.exists()  # the reopen retried the unlink


async def test_unlink_failure_during_normal_operation(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await env.open()
    await s.commit([append_list(PENDING, "p1"), set_value(MEMO, 1)])
    side = s.side_path(OP)
    calls = failing_unlink(monkeypatch, lambda p: p == str(side))
    r = await s.commit([append_entry("settled"), retire_scope(OP)])
    assert r.seqs == (3, 4)  # the commit succeeded
    assert calls == [str(side)] and side.exists()
    assert await s.read_list(PENDING) == [] and await s.get_value(MEMO) is None
    assert await s.live_scopes() == []
    await s.close()  # close retries too, and fails again
    assert side.exists()
    monkeypatch.undo()
    s = await env.open()
    assert not side.exists()  # next open cleans up
    assert await s.read_list(PENDING) == [] and await s.live_scopes() == []
    assert [e.value for e in await s.read_entries()] == ["settled"]
    assert s.next_seq == 5


async def test_reuse_after_failed_unlink_keeps_the_new_lifetime(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = await env.open()
    await s.commit([append_list(PENDING, "old")])
    side = s.side_path(OP)
    failing_unlink(monkeypatch, lambda p: p == str(side))
    await s.commit([retire_scope(OP)])
    # the old file is still there (dead records); the id is reused right away
    await s.commit([append_list(PENDING, "new"), set_value(MEMO, "new memo")])
    assert [e.value for e in await s.read_list(PENDING)] == ["new"]
    await s.close()  # must not delete the file: it now holds live data
    assert side.exists()
    monkeypatch.undo()
    s = await env.open()
    assert [e.value for e in await s.read_list(PENDING)] == ["new"]
    assert await s.get_value(MEMO) == "new memo"
    assert await s.live_scopes() == [OP]
    assert side.exists()  # live data: kept
    await s.commit([retire_scope(OP)])
    assert not side.exists()
    s = await env.reopen(s)
    assert await s.live_scopes() == [] and await s.read_list(PENDING) == []


async def test_reuse_racing_a_pending_unlink(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    # The retirement's unlink is held mid-flight (on the I/O thread); a write to the
    # reused id is already queued. It must run after the unlink, never before it.
    s = await env.open()
    await s.commit([append_list(PENDING, "old")])
    side = s.side_path(OP)
    entered, release = threading.Event(), threading.Event()
    real = os.unlink
    loop = asyncio.get_running_loop()

    def slow_unlink(path: Any, *args: Any, **kwargs: Any) -> None:
        if os.fspath(path) == str(side):
            entered.set()
            release.wait(timeout=30)
        real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", slow_unlink)
    retire = asyncio.create_task(s.commit([retire_scope(OP)]))
    await loop.run_in_executor(None, entered.wait, 30)
    reuse = asyncio.create_task(s.commit([append_list(PENDING, "new")]))
    for _ in range(5):  # let it run up to the session line (the outcome is checked below)
        await asyncio.sleep(0)
    assert not reuse.done() and not retire.done()
    release.set()
    await retire
    r = await reuse
    assert [e.value for e in await s.read_list(PENDING)] == ["new"]
    assert side.exists()
    monkeypatch.undo()
    s = await env.reopen(s)
    assert await s.read_list(PENDING) == [ListElement(r.seqs[0], "new", None)]


# -- failed writes ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [FsyncPolicy(), FsyncPolicy(main="none", side="none")])
async def test_failed_write_is_taken_back(
    env: Env, monkeypatch: pytest.MonkeyPatch, policy: FsyncPolicy
) -> None:
    env.policy = policy
    s = await env.open()
    await s.commit([append_list(HIST, "one")])
    before_bytes = s.main_path.read_bytes()
    before = await state(s)
    real_write = os.write
    main_fd = s._main.fd

    def half_then_fail(fd: int, data: Any) -> int:
        if fd == main_fd:
            monkeypatch.setattr(os, "write", boom)
            return real_write(fd, bytes(data)[: len(data) // 2])
        return real_write(fd, data)

    def boom(fd: int, data: Any) -> int:
        if fd == main_fd:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", half_then_fail)
    # the line would define address id 0 for HIST (second use): the failed commit must
    # not leave that definition in the writer's table
    with pytest.raises(BackendError, match=r"No space left on device.*was not committed"):
        await s.commit([append_list(HIST, "lost"), set_value(value("ns", "x"), 1)])
    assert s.main_path.read_bytes() == before_bytes  # the partial line was taken back
    assert await state(s) == {**before, "next_seq": before["next_seq"] + 2}  # seqs burnt
    monkeypatch.setattr(os, "write", real_write)
    r = await s.commit([append_list(HIST, "two")])
    assert r.seqs == (4,)
    s = await env.reopen(s)
    assert [e.value for e in await s.read_list(HIST)] == ["one", "two"]
    assert await s.get_value(value("ns", "x")) is None


# -- repository housekeeping ---------------------------------------------------------------


async def test_listing_ignores_side_and_temp_files_and_delete_removes_them(env: Env) -> None:
    s = await env.open("alpha")
    await s.commit([append_list(PENDING, "p")])
    await s.close()
    (env.dir / ".alpha.jsonl.123.tmp").write_bytes(b"half")
    (env.dir / "alpha.jsonl.scopes" / ".scope-x.scope.9.tmp").write_bytes(b"half")
    (env.dir / "notes.txt").write_text("not a session")
    (env.dir / "bad name!.jsonl").write_text("{}")
    repo = env.repo()
    assert await repo.list_sessions() == ["alpha"]
    s = await env.open("alpha")  # stale temp files are ignored (and swept)
    assert [e.value for e in await s.read_list(PENDING)] == ["p"]
    await s.close()
    assert not (env.dir / "alpha.jsonl.scopes" / ".scope-x.scope.9.tmp").exists()
    await repo.delete_session("alpha")
    assert not (env.dir / "alpha.jsonl").exists()
    assert not (env.dir / "alpha.jsonl.scopes").exists()
    assert await repo.list_sessions() == []


async def test_create_does_not_adopt_a_side_dir_left_by_an_interrupted_delete(
    env: Env,
) -> None:
    s = await env.open("a")
    await s.commit([append_list(PENDING, "old session")])
    await s.close()
    s.main_path.unlink()  # delete crashed after its commit point
    assert await env.repo().list_sessions() == []
    s = await env.open("a")
    assert await s.live_scopes() == [] and await s.read_list(PENDING) == []
    assert s.next_seq == 1


async def test_a_session_has_one_writer(env: Env) -> None:
    s = await env.open()
    with pytest.raises(StorageError, match="open in another repository object or process"):
        await env.repo().open_session("s")
    with pytest.raises(StorageError, match="open in another repository object or process"):
        await env.repo().delete_session("s")
    await s.close()
    s = await env.open()
    assert s.next_seq == 1


async def test_side_file_with_only_a_header_and_a_torn_line_is_removed(env: Env) -> None:
    s = await env.open()
    await s.commit([append_entry("e")])
    await s.close()
    side = s.side_path(OP)
    side.parent.mkdir()
    header = s.main_path.read_bytes().splitlines()[0].replace(b"session_header", b"scope_header")
    side.write_bytes(header[:-1] + b',"scopeId":"op 1/\xc3\xa9"}\n[["l",["a","b"],2,"x')
    s = await env.open()
    assert await s.live_scopes() == [] and s.next_seq == 2
    assert not side.exists()


async def test_high_water_counts_side_files(env: Env) -> None:
    s = await env.open()
    await s.commit([append_entry("e")])  # 1
    await s.commit([append_list(PENDING, "a"), append_list(PENDING, "b")])  # 2, 3
    s = await env.reopen(s)
    assert s.next_seq == 4
    assert (await s.commit([append_entry("f")])).seqs == (4,)


@pytest.mark.parametrize("policy", [FsyncPolicy(), FsyncPolicy(main="none", side="none")])
async def test_policies_round_trip(env: Env, policy: FsyncPolicy) -> None:
    env.policy = policy
    s = await env.open()
    await s.commit([append_list(PENDING, ["base"], tag="base"), set_value(MEMO, 1)])
    await s.commit([append_list(HIST, "h"), append_entry("e")])
    before = await state(s)
    s = await env.reopen(s)
    assert await state(s) == before


async def test_session_scope_never_touches_side_files(env: Env) -> None:
    s = await env.open()
    await s.commit([append_list(HIST, "h"), set_value(value("ns", "k", SESSION), 1)])
    assert not (env.dir / "s.jsonl.scopes").exists()
