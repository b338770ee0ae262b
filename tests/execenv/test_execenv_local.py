"""LocalExecEnv against real processes: big output, huge lines, teardown, failures."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

import pytest

from sandbox_escapes import PID_RECORD, record_dead
from toolfold.execenv import (
    CallbackError,
    CaptureOptions,
    ExecConfigError,
    ExecStartError,
    LocalExecEnv,
    Metadata,
    Replace,
    Sandbox,
    ShellExecResult,
    ShellOutputLimits,
    ShellOutputMetadata,
    ShellOutputUpdate,
    ShellOutputView,
    SpillError,
    _spill,
    apply_shell_output_update,
)

BOUND = 60.0  # a hang fails the test instead of stalling the suite


def fold(updates: list[ShellOutputUpdate]) -> ShellOutputView:
    view = None
    for u in updates:
        view = apply_shell_output_update(view, u)
    assert view is not None
    return view


async def run(
    exec_env: LocalExecEnv, command: str, /, **kw: object
) -> tuple[ShellExecResult, list[ShellOutputUpdate]]:
    updates: list[ShellOutputUpdate] = []
    result = await asyncio.wait_for(exec_env.exec(command, on_update=updates.append, **kw), BOUND)  # type: ignore[arg-type]
    return result, updates


@pytest.fixture
def env(tmp_path: Path, sandbox: Sandbox | None) -> LocalExecEnv:
    return LocalExecEnv(tmp_path / "spill" / "session-1", kill_grace=0.5, sandbox=sandbox)


async def test_small_output_exit_code_and_single_replace(env: LocalExecEnv) -> None:
    result, updates = await run(env, "printf 'hello\\nworld'; exit 3")
    assert result.exit_code == 3
    assert result.text == "hello\nworld"
    assert result.truncation.total_lines == 2 and result.truncation.total_bytes == 11
    assert result.spill_path is None
    # Lazy: nothing on disk (a sandbox makes the directory up front, to hide it).
    assert env.spill_dir.exists() == (env.sandbox is not None)
    assert not env.spill_dir.exists() or not any(env.spill_dir.iterdir())
    assert isinstance(updates[0], Replace)
    assert fold(updates) == result.view


async def test_no_output_still_publishes_one_replace(env: LocalExecEnv) -> None:
    result, updates = await run(env, "true")
    assert result.exit_code == 0 and result.text == ""
    assert len(updates) == 1 and isinstance(updates[0], Replace)
    assert result.last_line_bytes is None


async def test_cwd_and_env_are_passed(env: LocalExecEnv, tmp_path: Path) -> None:
    result, _ = await run(
        env,
        'pwd; echo "$GREETING"',
        cwd=tmp_path,
        env={"GREETING": "hi", "PATH": os.environ["PATH"]},
    )
    assert result.text == f"{tmp_path}\nhi\n"


async def test_start_failure_is_translated(env: LocalExecEnv, tmp_path: Path) -> None:
    with pytest.raises(
        ExecStartError, match=r"cannot start .*missing-dir.*check that the shell exists"
    ) as info:
        await env.exec("true", cwd=tmp_path / "missing-dir")
    assert isinstance(info.value.__cause__, OSError)


async def test_bad_arguments_are_refused(env: LocalExecEnv) -> None:
    with pytest.raises(
        ExecConfigError, match="timeout must be a number of seconds > 0 or None, got -1"
    ):
        await env.exec("true", timeout=-1)
    with pytest.raises(ExecConfigError, match="max_bytes must be a positive int, got 0"):
        ShellOutputLimits(max_bytes=0)
    with pytest.raises(ExecConfigError, match="kill_grace must be a number >= 0"):
        LocalExecEnv(env.spill_dir, kill_grace=-1)


async def test_300_megabytes_through_a_pipe_bounded_with_exact_totals_and_spill(
    env: LocalExecEnv,
) -> None:
    result, updates = await run(env, "yes | head -c 300M")
    size = 300 * 1024 * 1024
    assert result.exit_code == 0
    assert result.truncation.total_bytes == size
    assert result.truncation.total_lines == size // 2
    assert result.truncation.truncated and result.truncation.truncated_by == "lines"
    assert result.text == "y\n" * 2000
    assert fold(updates) == result.view
    assert isinstance(updates[0], Replace)
    assert all(not isinstance(u, Replace) or len(u.output.text) <= 50 * 1024 for u in updates)
    assert result.spill_path is not None
    spill = Path(result.spill_path)
    assert spill.parent == env.spill_dir and spill.name.startswith("exec-")
    try:
        assert spill.stat().st_size == size
        with spill.open("rb") as f:
            assert f.read(4096) == b"y\n" * 2048
            f.seek(size - 4096)
            assert f.read() == b"y\n" * 2048
    finally:
        spill.unlink()


async def test_spill_path_is_published_as_soon_as_the_file_exists(env: LocalExecEnv) -> None:
    seen: list[tuple[ShellOutputUpdate, bool]] = []

    def on_update(u: ShellOutputUpdate) -> None:
        seen.append((u, env.spill_dir.exists() and any(env.spill_dir.iterdir())))

    result = await asyncio.wait_for(env.exec("seq 1 20000", on_update=on_update), BOUND)
    first_file = next(i for i, (_, exists) in enumerate(seen) if exists)
    first_path = next(i for i, (u, _) in enumerate(seen) if _meta(u).spill_path)
    assert first_file == first_path  # no publication after creation lacks the path
    # ...and it went out with the read that crossed the cap (at most one 256 KiB read later).
    assert _meta(seen[first_path][0]).truncation.total_bytes <= 50 * 1024 + 256 * 1024
    assert Path(result.spill_path or "").read_bytes() == b"".join(
        f"{i}\n".encode() for i in range(1, 20001)
    )
    assert result.text.endswith("20000\n") and result.truncation.output_lines == 2000


def _meta(u: ShellOutputUpdate) -> ShellOutputMetadata:
    return u.output.metadata if isinstance(u, Replace) else u.metadata


async def test_one_megabyte_lines_tail_is_partial_with_exact_last_line_bytes(
    env: LocalExecEnv,
) -> None:
    cmd = "for c in a b c; do head -c 1000000 /dev/zero | tr '\\0' $c; echo; done; head -c 1500000 /dev/zero | tr '\\0' d"
    result, updates = await run(
        env, cmd, capture=CaptureOptions(limits=ShellOutputLimits(max_bytes=1000))
    )
    tr = result.truncation
    assert result.text == "d" * 1000
    assert tr.last_line_partial and tr.truncated_by == "bytes"
    assert tr.total_lines == 4 and tr.total_bytes == 3 * 1_000_001 + 1_500_000
    assert result.last_line_bytes == 1_500_000
    assert fold(updates) == result.view
    Path(result.spill_path or "").unlink()


async def test_one_megabyte_first_line_in_head_mode(env: LocalExecEnv) -> None:
    cmd = "head -c 1000000 /dev/zero | tr '\\0' a; echo; echo second"
    limits = ShellOutputLimits(max_bytes=100, retain="head")
    result, updates = await run(env, cmd, capture=CaptureOptions(limits=limits))
    assert result.text == "a" * 100
    assert result.truncation.first_line_exceeds_limit and result.truncation.total_lines == 2
    assert result.last_line_bytes == 6
    assert fold(updates) == result.view
    assert any(isinstance(u, Metadata) for u in updates) or len(updates) <= 2


async def test_stdout_and_stderr_feed_one_view_in_arrival_order(env: LocalExecEnv) -> None:
    cmd = "for i in $(seq 1 300); do echo out$i; echo err$i >&2; done"
    result, updates = await run(env, cmd)
    lines = result.text.splitlines()
    assert sorted(lines) == sorted(
        [f"out{i}" for i in range(1, 301)] + [f"err{i}" for i in range(1, 301)]
    )
    # Each stream's own order is preserved; the interleaving is the order reads arrived.
    assert [x for x in lines if x.startswith("out")] == [f"out{i}" for i in range(1, 301)]
    assert [x for x in lines if x.startswith("err")] == [f"err{i}" for i in range(1, 301)]
    assert fold(updates) == result.view


async def test_ansi_and_carriage_return_progress_are_cleaned_only_in_the_view(
    env: LocalExecEnv,
) -> None:
    cmd = "printf '\\033[32mok\\033[0m\\n'; for p in 10 50 100; do printf '\\r%s%%' $p; done; echo"
    result, updates = await run(
        env, cmd, capture=CaptureOptions(limits=ShellOutputLimits(max_bytes=20))
    )
    assert result.text == "ok\n100%\n"
    assert fold(updates) == result.view
    assert result.spill_path is not None  # raw (with escapes) exceeded 20 bytes
    assert Path(result.spill_path).read_bytes() == b"\x1b[32mok\x1b[0m\n\r10%\r50%\r100%\n"


async def test_timeout_kills_the_group_and_publishes_the_latest_state(
    env: LocalExecEnv, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    result, updates = await run(
        env, f"sleep 30 & echo $! {PID_RECORD} > {pidfile}; echo before; wait", timeout=0.5
    )
    assert result.timed_out and not result.cancelled and result.exit_code is None
    assert result.text == "before\n"
    assert fold(updates) == result.view
    assert record_dead(pidfile.read_text())


async def test_command_ignoring_sigterm_is_killed_after_the_grace(
    env: LocalExecEnv, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    cancel = asyncio.Event()
    updates: list[ShellOutputUpdate] = []

    def on_update(u: ShellOutputUpdate) -> None:
        updates.append(u)
        if "stubborn" in fold(updates).text:
            cancel.set()  # the trap and the pid file are in place by now

    cmd = f"trap '' TERM; sleep 30 & echo $! {PID_RECORD} > {pidfile}; echo stubborn; wait; wait; echo survived"
    result = await asyncio.wait_for(env.exec(cmd, cancel=cancel, on_update=on_update), BOUND)
    assert result.cancelled and result.exit_code is None
    assert result.text == "stubborn\n"  # SIGTERM was ignored: only SIGKILL stopped it
    assert record_dead(pidfile.read_text())
    assert fold(updates) == result.view


async def test_cancel_event_mid_stream(env: LocalExecEnv) -> None:
    cancel = asyncio.Event()
    updates: list[ShellOutputUpdate] = []
    seen: list[ShellOutputView] = []

    def on_update(u: ShellOutputUpdate) -> None:
        updates.append(u)
        seen.append(apply_shell_output_update(seen[-1] if seen else None, u))
        if seen[-1].metadata.truncation.total_lines >= 50:
            cancel.set()

    cmd = "i=0; while true; do i=$((i+1)); echo line $i; done"
    result = await asyncio.wait_for(env.exec(cmd, cancel=cancel, on_update=on_update), BOUND)
    assert result.cancelled and not result.timed_out and result.exit_code is None
    assert result.text.startswith("line ") or result.truncation.truncated
    assert fold(updates) == result.view
    assert result.truncation.total_lines >= 50


async def test_task_cancellation_tears_down_and_propagates(
    env: LocalExecEnv, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    started = asyncio.Event()
    updates: list[ShellOutputUpdate] = []

    def on_update(u: ShellOutputUpdate) -> None:
        updates.append(u)
        started.set()

    task = asyncio.ensure_future(
        env.exec(f"sleep 30 & echo $! {PID_RECORD} > {pidfile}; echo up; wait", on_update=on_update)
    )
    await asyncio.wait_for(started.wait(), BOUND)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, BOUND)
    assert record_dead(pidfile.read_text())
    assert fold(updates).text == "up\n"


async def test_unwritable_spill_dir_fails_clearly_and_kills_the_child(tmp_path: Path) -> None:
    # CI runs as root, so "unwritable" is a path below a regular file: root cannot mkdir there.
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    env = LocalExecEnv(blocker / "spill", kill_grace=0.5)
    pidfile = tmp_path / "pid"
    updates: list[ShellOutputUpdate] = []
    with pytest.raises(
        SpillError, match=r"cannot create spill directory .*not-a-dir/spill.*writable directory"
    ) as info:
        await asyncio.wait_for(
            env.exec(f"echo $$ {PID_RECORD} > {pidfile}; exec yes", on_update=updates.append), BOUND
        )
    assert info.value.path == str(blocker / "spill")
    assert isinstance(info.value.__cause__, OSError)
    assert record_dead(pidfile.read_text())
    assert updates and fold(updates).text.startswith("y\n")  # latest bounded state still published
    assert blocker.read_text() == "x"


async def test_spill_write_failure_kills_the_child(
    env: LocalExecEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fd: int, data: list[bytes]) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(_spill, "_write_all", broken)
    pidfile = tmp_path / "pid"
    with pytest.raises(SpillError, match=r"writing spill file .*exec-.*Input/output error"):
        await asyncio.wait_for(env.exec(f"echo $$ {PID_RECORD} > {pidfile}; exec yes"), BOUND)
    assert record_dead(pidfile.read_text())


async def test_a_full_disk_stops_the_spill_not_the_command(
    env: LocalExecEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Fault injection: the first spill write finds the disk full (the tmpfs test in
    # test_execenv_spill_limits.py does it for real).
    def full(fd: int, data: list[bytes]) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(_spill, "_write_all", full)
    result = await asyncio.wait_for(env.exec("yes | head -c 4000000"), BOUND)
    assert result.exit_code == 0
    assert result.truncation.total_bytes == 4_000_000
    assert result.truncation.total_lines == 2_000_000
    assert result.spill_path is not None
    assert result.spill_note == "the first 0 B only: the disk filled up"


async def test_consumer_error_fails_the_exec_and_kills_the_child(
    env: LocalExecEnv, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    calls: list[ShellOutputUpdate] = []

    def on_update(u: ShellOutputUpdate) -> None:
        calls.append(u)
        raise KeyError("lane closed")

    with pytest.raises(CallbackError, match="on_update consumer raised KeyError") as info:
        await asyncio.wait_for(
            env.exec(f"echo $$ {PID_RECORD} > {pidfile}; exec yes", on_update=on_update), BOUND
        )
    assert isinstance(info.value.__cause__, KeyError)
    assert len(calls) == 1
    assert record_dead(pidfile.read_text())


async def test_async_consumer_receives_every_update_in_order(env: LocalExecEnv) -> None:
    received: list[ShellOutputUpdate] = []
    in_flight = 0

    async def on_update(u: ShellOutputUpdate) -> None:
        nonlocal in_flight
        in_flight += 1
        assert in_flight == 1  # deliveries never overlap
        await asyncio.sleep(0)  # yield to the loop mid-delivery
        received.append(u)
        in_flight -= 1

    result = await asyncio.wait_for(env.exec("seq 1 50000", on_update=on_update), BOUND)
    assert received and isinstance(received[0], Replace)
    assert fold(received) == result.view
    assert result.text.endswith("50000\n")
