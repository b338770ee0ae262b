"""The kernel-copy spill (tee(2) + splice(2), Linux) and the pipe reader that feeds it.

Past the cap, LocalExecEnv tees each read's bytes into the spill's own pipe and the
writer thread splices them into the file; where that is not possible it falls back to
writing what it read. Every path must give the same byte-exact file, the same failure
handling and the same stdout/stderr order.
"""

from __future__ import annotations

import asyncio
import errno
import os
import sys
import threading
from pathlib import Path

import pytest

from sandbox_escapes import PID_RECORD, record_dead
from toolfold.execenv import (
    CaptureOptions,
    LocalExecEnv,
    Sandbox,
    ShellOutputLimits,
    SpillError,
    _spill,
)

BOUND = 60.0
SIZE = 8_000_000
# Every byte value, so that the file is compared on raw bytes (not on lines).
PRODUCER = f'python3 -c "import sys; sys.stdout.buffer.write((bytes(range(256)) * {SIZE // 256 + 1})[:{SIZE}])"'
EXPECTED = (bytes(range(256)) * (SIZE // 256 + 1))[:SIZE]
SMALL = CaptureOptions(limits=ShellOutputLimits(max_bytes=4096, max_lines=50))


@pytest.fixture
def spliced(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Byte counts the writer thread moved with splice."""
    seen: list[int] = []
    real = _spill._splice_all

    def spy(src: int, fd: int, size: int) -> None:
        seen.append(size)
        real(src, fd, size)

    monkeypatch.setattr(_spill, "_splice_all", spy)
    return seen


async def test_past_the_cap_the_kernel_copies_the_output_into_the_spill(
    tmp_path: Path, sandbox: Sandbox | None, spliced: list[int]
) -> None:
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    result = await asyncio.wait_for(env.exec(PRODUCER, capture=SMALL), BOUND)
    assert result.exit_code == 0
    assert result.truncation.total_bytes == SIZE
    # (plus one for the final line, which has no newline)
    assert result.truncation.total_lines == EXPECTED.count(b"\n") + 1
    assert result.spill_path is not None and result.spill_note is None
    assert Path(result.spill_path).read_bytes() == EXPECTED
    if sys.platform == "linux":  # elsewhere there is no tee: all of it was written
        assert sum(spliced) > SIZE // 2  # most of it never went through Python's write


async def test_without_tee_the_same_file_is_written(
    tmp_path: Path, sandbox: Sandbox | None, spliced: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_spill, "_tee_function", lambda: None)  # as on a system without tee(2)
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    result = await asyncio.wait_for(env.exec(PRODUCER, capture=SMALL), BOUND)
    assert result.truncation.total_bytes == SIZE
    assert Path(result.spill_path or "").read_bytes() == EXPECTED
    assert spliced == []


async def test_a_refused_tee_falls_back_to_writing_without_losing_a_byte(
    tmp_path: Path, sandbox: Sandbox | None, spliced: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def refused(src: int, dst: int, size: int, flags: int) -> int:
        calls.append(size)
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))  # e.g. not a pipe

    monkeypatch.setattr(_spill, "_tee_function", lambda: refused)
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    result = await asyncio.wait_for(env.exec(PRODUCER, capture=SMALL), BOUND)
    assert Path(result.spill_path or "").read_bytes() == EXPECTED
    assert len(calls) == 1 and spliced == []  # asked once, then copied


async def test_a_file_system_without_splice_gets_a_copy_of_the_teed_bytes(
    tmp_path: Path, sandbox: Sandbox | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused: list[int] = []

    def no_splice(src: int, dst: int, count: int, *args: object) -> int:
        refused.append(count)
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    monkeypatch.setattr(_spill.os, "splice", no_splice)
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    result = await asyncio.wait_for(env.exec(PRODUCER, capture=SMALL), BOUND)
    assert result.spill_note is None
    assert Path(result.spill_path or "").read_bytes() == EXPECTED
    if sys.platform == "linux":
        assert refused  # the teed bytes were there, and were copied


async def test_a_failing_kernel_copy_fails_the_exec_and_kills_the_command(
    tmp_path: Path, sandbox: Sandbox | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(src: int, fd: int, size: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(_spill, "_splice_all", broken)
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, sandbox=sandbox)
    pidfile = tmp_path / "pid"
    with pytest.raises(SpillError, match=r"writing spill file .*exec-.*Input/output error"):
        await asyncio.wait_for(env.exec(f"echo $$ {PID_RECORD} > {pidfile}; exec yes"), BOUND)
    assert record_dead(pidfile.read_text())


async def test_a_full_disk_under_the_kernel_copy_stops_the_spill_not_the_command(
    tmp_path: Path, sandbox: Sandbox | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(src: int, fd: int, size: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_spill, "_splice_all", full)
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    result = await asyncio.wait_for(env.exec(PRODUCER, capture=SMALL), BOUND)
    assert result.exit_code == 0
    assert result.truncation.total_bytes == SIZE  # the view and totals go on
    assert result.spill_note is not None and result.spill_note.endswith("only: the disk filled up")
    kept = Path(result.spill_path or "").read_bytes()
    if sys.platform == "linux":
        assert 0 < len(kept) < SIZE  # the raw prefix written before the first splice
    assert kept == EXPECTED[: len(kept)]


async def test_a_full_spill_pipe_pauses_reading_until_the_writer_caught_up(
    tmp_path: Path, sandbox: Sandbox | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer thread is held in its first splice until the reader has paused (the
    # spill's pipe filled up); then everything must still arrive, in order.
    paused = threading.Event()
    pauses: list[int] = []
    real_splice, real_pause = _spill._splice_all, _spill.SpillFile._pause

    def held(src: int, fd: int, size: int) -> None:
        paused.wait(BOUND)
        real_splice(src, fd, size)

    def pause(self: _spill.SpillFile, resume_below: int) -> None:
        pauses.append(resume_below)
        paused.set()
        real_pause(self, resume_below)

    monkeypatch.setattr(_spill, "_splice_all", held)
    monkeypatch.setattr(_spill.SpillFile, "_pause", pause)
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    result = await asyncio.wait_for(env.exec(PRODUCER, capture=SMALL), BOUND)
    assert Path(result.spill_path or "").read_bytes() == EXPECTED
    if sys.platform == "linux":
        assert pauses and pauses[0] == _spill._TEE_PIPE_SIZE // 2  # the pipe filled first


async def test_interleaved_stdout_and_stderr_each_keep_their_order(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    # One process alternating between the two pipes faster than a read's round trip.
    # Between the pipes the order is the order of the reads (neither asyncio's pipe
    # transports nor this reader can see which of two writes came first once both are
    # waiting); within each pipe nothing may be lost or reordered, gathering or not.
    n = 300
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    cmd = f"for i in $(seq 1 {n}); do echo out$i; echo err$i >&2; done"
    result = await asyncio.wait_for(
        env.exec(cmd, capture=CaptureOptions(limits=ShellOutputLimits(max_lines=3 * n))), BOUND
    )
    lines = result.text.splitlines()
    assert [x for x in lines if x.startswith("out")] == [f"out{i}" for i in range(1, n + 1)]
    assert [x for x in lines if x.startswith("err")] == [f"err{i}" for i in range(1, n + 1)]
    assert len(lines) == 2 * n


async def test_a_trickle_read_in_gathered_reads_loses_nothing(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    # Many small flushed writes on one pipe: the reader waits a moment after each small
    # read (fewer reads; how many is timing, measured in benchmarks/) and must still see
    # every byte and the end of file, then the other pipe's last line after them.
    n = 20_000
    env = LocalExecEnv(tmp_path / "spill", sandbox=sandbox)
    cmd = f'python3 -c "for i in range(1, {n + 1}): print(i, flush=True)"; echo done >&2'
    result = await asyncio.wait_for(env.exec(cmd, capture=SMALL), BOUND)
    assert result.exit_code == 0
    assert result.truncation.total_lines == n + 1
    assert result.text.endswith(f"{n - 1}\n{n}\ndone\n")
    expected = b"".join(b"%d\n" % i for i in range(1, n + 1)) + b"done\n"
    assert Path(result.spill_path or "").read_bytes() == expected
