"""Spill files: a per-command cap, a free-space check (on a real, small tmpfs), 0600
files in 0700 directories, and spill directories that refuse links planted in them."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from tmpfs_fixture import fill, small_tmpfs
from toolfold.execenv import (
    CaptureOptions,
    LocalExecEnv,
    Sandbox,
    ShellOutputLimits,
    SpillError,
)
from toolfold.execenv._spill import free_space_reserve

BOUND = 60.0
LINE = b"0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01234567\n"
# 82-byte lines, written by a command that produces exactly N of them
PRINT = 'python3 -c "import sys; sys.stdout.buffer.write({line!r} * {n})"'


def command(n: int) -> str:
    return PRINT.format(line=LINE, n=n)


def options(max_spill: int) -> CaptureOptions:
    return CaptureOptions(limits=ShellOutputLimits(max_lines=10), max_spill=max_spill)


async def test_at_the_cap_spilling_stops_and_the_window_and_totals_stay_exact(
    tmp_path: Path,
    sandbox: Sandbox | None,
) -> None:
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    n = 50_000  # 4.1 MB
    result = await asyncio.wait_for(env.exec(command(n), capture=options(1_000_000)), BOUND)
    assert result.exit_code == 0
    assert result.truncation.total_bytes == n * len(LINE)
    assert result.truncation.total_lines == n
    assert result.text == (LINE * 10).decode()  # the last ten lines
    assert result.spill_path is not None
    assert Path(result.spill_path).read_bytes() == (LINE * n)[:1_000_000]
    assert result.spill_note == "the first 977 KiB only: the spill cap (max_spill)"  # 1,000,000 B


async def test_the_default_cap_is_one_gibibyte() -> None:
    assert CaptureOptions().max_spill == 1 << 30
    with pytest.raises(Exception, match="max_spill must be a positive int"):
        CaptureOptions(max_spill=0)


async def test_spilling_leaves_room_on_a_small_disk(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    with small_tmpfs(tmp_path / "mnt", size="8m") as mnt:
        env = LocalExecEnv(mnt / "spill", sandbox=sandbox)
        n = 200_000  # 16.4 MB into an 8 MiB file system
        result = await asyncio.wait_for(env.exec(command(n), capture=options(1 << 30)), BOUND)
        assert result.exit_code == 0
        assert result.truncation.total_bytes == n * len(LINE)
        assert result.text == (LINE * 10).decode()
        assert result.spill_path is not None and result.spill_note is not None
        assert "only:" in result.spill_note and "a spill leaves" in result.spill_note
        kept = Path(result.spill_path).read_bytes()
        assert kept == (LINE * n)[: len(kept)] and len(kept) > 1_000_000
        st = os.statvfs(mnt)
        reserve = free_space_reserve(st.f_blocks * st.f_frsize)
        assert st.f_bavail * st.f_frsize >= reserve - 4096  # the store keeps its room


async def test_no_spill_at_all_when_the_disk_is_already_full(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    with small_tmpfs(tmp_path / "mnt", size="4m") as mnt:
        (mnt / "spill").mkdir()
        fill(mnt)
        env = LocalExecEnv(mnt / "spill", sandbox=sandbox)
        result = await asyncio.wait_for(env.exec(command(1000), capture=options(1 << 30)), BOUND)
        assert result.exit_code == 0 and result.truncation.total_lines == 1000
        assert result.spill_path is None
        assert result.spill_note is not None and result.spill_note.startswith("not written:")
        assert list((mnt / "spill").iterdir()) == []


async def test_a_disk_that_fills_up_while_spilling_stops_the_spill_not_the_command(
    tmp_path: Path,
    sandbox: Sandbox | None,
) -> None:
    with small_tmpfs(tmp_path / "mnt", size="8m") as mnt:
        env = LocalExecEnv(mnt / "spill", sandbox=sandbox)
        # 2 MB, then another process takes every free byte, then 2 MB more.
        cmd = f"{command(25_000)}; cat /dev/zero > {mnt}/filler 2>/dev/null; {command(25_000)}"
        result = await asyncio.wait_for(env.exec(cmd, capture=options(1 << 30)), BOUND)
        assert result.exit_code == 0
        assert result.truncation.total_bytes == 50_000 * len(LINE)
        assert result.spill_note is not None and "the disk filled up" in result.spill_note
        assert result.spill_path is not None
        kept = Path(result.spill_path).read_bytes()
        assert kept == (LINE * 50_000)[: len(kept)]


async def test_spill_files_are_0600_in_0700_directories_whatever_the_umask(
    tmp_path: Path,
    sandbox: Sandbox | None,
) -> None:
    env = LocalExecEnv(tmp_path / "a" / "b" / "spill", sandbox=sandbox)
    old = os.umask(0)
    try:
        result = await asyncio.wait_for(env.exec(command(100), capture=options(1 << 30)), BOUND)
    finally:
        os.umask(old)
    assert result.spill_path is not None
    assert stat.S_IMODE(os.stat(result.spill_path).st_mode) == 0o600
    for d in (tmp_path / "a" / "b", tmp_path / "a" / "b" / "spill"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d


@pytest.mark.parametrize("planted", ["spill", "parent"])
async def test_a_planted_symlink_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path, sandbox: Sandbox | None, planted: str
) -> None:
    # The attack: someone who can write where the store lives plants a link where
    # toolfold would create its spill directory, to collect (or misplace) the output.
    target = tmp_path / "attacker"
    target.mkdir()
    spill = tmp_path / "store" / "spill" / "session"
    link = spill if planted == "spill" else spill.parent
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target, target_is_directory=True)
    env = LocalExecEnv(spill, sandbox=sandbox)
    with pytest.raises(SpillError, match=r"is a symbolic link .*follows no link it did not"):
        await asyncio.wait_for(env.exec(command(1000)), BOUND)
    assert list(target.rglob("*")) == []


async def test_a_spill_directory_owned_by_someone_else_is_refused(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    spill = tmp_path / "spill"
    spill.mkdir()
    os.chown(spill, 65534, 65534)  # the tests run as root; "nobody" plays the attacker
    env = LocalExecEnv(spill, sandbox=sandbox)
    with pytest.raises(SpillError, match=r"is owned by uid 65534, not you"):
        await asyncio.wait_for(env.exec(command(1000)), BOUND)
    assert list(spill.iterdir()) == []
