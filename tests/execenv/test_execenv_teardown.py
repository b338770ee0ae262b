"""LocalExecEnv teardown edges with real processes: leftovers after exit, cancel at start."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox_escapes import PID_RECORD, record_pid
from toolfold.execenv import (
    ExecConfigError,
    LocalExecEnv,
    Sandbox,
    ShellOutputUpdate,
    ShellOutputView,
    _spawn,
    apply_shell_output_update,
)

BOUND = 60.0  # a hang fails the test instead of stalling the suite
EXIT_BOUND = 5.0  # from "should be dead" to dead


def dead(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


async def exits(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie counts), waiting on its pidfd.

    A killed process closes its files (our pipes reach EOF) a moment before the kernel
    marks it exited, so this synchronises on the exit itself. It is called once the process
    should already be dead, so a process that was not killed makes it return False within
    EXIT_BOUND seconds, and it is SIGKILLed then: a failing test leaves nothing running.
    """
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await asyncio.wait_for(done, EXIT_BOUND)
        return True
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


@pytest.fixture
def env(tmp_path: Path, sandbox: Sandbox | None) -> LocalExecEnv:
    return LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2, sandbox=sandbox)


@pytest.fixture
def host_env(tmp_path: Path) -> LocalExecEnv:
    return LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)


@pytest.fixture
def survivors() -> Iterator[list[int]]:
    """Pids a test deliberately leaves running; killed at the end whatever happens."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# Unconfined only (this and the next): in a sandbox the leftovers die with the shell's
# pid namespace, so none holds the output after the shell exited.
async def test_background_process_holding_the_pipes_is_killed_after_the_shell_exits(
    host_env: LocalExecEnv,
) -> None:
    # Without the exit grace this waits for `sleep` (the timeout is far away).
    result = await asyncio.wait_for(
        host_env.exec("sleep 1000 & echo $!; echo hi; exit 3", timeout=BOUND * 10), BOUND
    )
    pid = int(result.text.split()[0])
    assert result.text.endswith("hi\n")
    assert result.exit_code == 3  # the shell's own status: it was not killed
    assert result.background_killed and not result.timed_out and not result.cancelled
    assert await exits(pid)


async def test_background_process_ignoring_sigterm_is_killed_too(host_env: LocalExecEnv) -> None:
    result = await asyncio.wait_for(
        host_env.exec("(trap '' TERM; echo $BASHPID; exec sleep 1000) & true"),
        BOUND,
    )
    lines = result.text.split()
    # the subshell may print its pid after the shell exited: it still holds the pipes
    assert lines, result.text
    assert result.exit_code == 0 and result.background_killed
    assert await exits(int(lines[0]))


# Unconfined only: a sandbox's pid namespace, daemons included, dies with the command.
async def test_background_processes_that_let_go_of_the_output_keep_running(
    host_env: LocalExecEnv, survivors: list[int]
) -> None:
    # The two documented ways to leave a daemon behind: redirect its output (it stays in
    # the group but holds no pipe), or also give it its own session with setsid.
    result = await asyncio.wait_for(
        host_env.exec(
            "sleep 1000 > /dev/null 2>&1 & echo $!; "
            "setsid sleep 1000 > /dev/null 2>&1 < /dev/null & echo $!"
        ),
        BOUND,
    )
    pids = [int(p) for p in result.text.split()]
    survivors.extend(pids)
    assert result.exit_code == 0 and not result.background_killed
    assert len(pids) == 2 and not any(dead(p) for p in pids)


async def test_cancel_while_the_shell_is_starting_kills_the_whole_group(
    env: LocalExecEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, survivors: list[int]
) -> None:
    # asyncio's start-up (no pidfd): it awaits, so a cancel can land inside it. Where
    # the shell is started on a pidfd nothing is awaited and there is no such moment.
    monkeypatch.setattr(_spawn, "_pidfd", False)
    real_spawn = _spawn.start_child
    gate = asyncio.Event()
    started: list[object] = []

    async def gated_spawn(*args: Any, **kwargs: Any) -> Any:
        # Hold exec inside its start-up (the shell runs, the spawn has not returned)
        # until the test says so.
        spawned = await real_spawn(*args, **kwargs)
        started.append(spawned)
        await gate.wait()
        return spawned

    monkeypatch.setattr(_spawn, "start_child", gated_spawn)
    fifo = tmp_path / "pids"
    os.mkfifo(fifo)
    task = asyncio.create_task(
        env.exec(f"sleep 1000 & echo $$ {PID_RECORD} $! {PID_RECORD} > {fifo}; wait")
    )
    # The shell is running and has forked a child, while exec is still starting.
    words = (await asyncio.wait_for(asyncio.to_thread(fifo.read_text), BOUND)).split()
    shell, child = " ".join(words[:2]), " ".join(words[2:])
    shell_pid, child_pid = record_pid(shell), record_pid(child)
    assert shell_pid is not None and child_pid is not None
    survivors.extend([shell_pid, child_pid])
    assert not task.done()
    for _ in range(1000):  # bounded: the spawn returns a few loop turns after the fork
        if started:
            break
        await asyncio.sleep(0)
    assert started and not gate.is_set()  # exec is inside its start-up
    task.cancel()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, BOUND)
    assert await exits(shell_pid)
    assert await exits(child_pid)  # asyncio alone would have SIGKILLed the shell only


def test_exit_grace_is_validated(tmp_path: Path) -> None:
    with pytest.raises(
        ExecConfigError, match=r"exit_grace must be a number >= 0 \(seconds\), got -1"
    ):
        LocalExecEnv(tmp_path, exit_grace=-1)


# Unconfined only (this and the next): in a sandbox nothing outlives the shell's exit.
async def test_output_of_a_background_job_that_ends_within_the_grace_is_kept(
    tmp_path: Path,
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=BOUND)
    fifo = tmp_path / "go"
    os.mkfifo(fifo)
    seen = asyncio.Event()
    view: ShellOutputView | None = None

    def record(u: ShellOutputUpdate) -> None:
        nonlocal view
        view = apply_shell_output_update(view, u)
        if view.text.strip():
            seen.set()

    task = asyncio.create_task(
        env.exec(f"(read x < {fifo}; echo late) & echo $$", on_update=record)
    )
    await asyncio.wait_for(seen.wait(), BOUND)
    assert view is not None
    shell_pid = int(view.text.split()[0])
    assert await exits(shell_pid)  # the shell is gone; its background job holds the pipes
    assert not task.done()
    await asyncio.to_thread(fifo.write_text, "go\n")  # let the job finish
    result = await asyncio.wait_for(task, BOUND)
    assert result.text == f"{shell_pid}\nlate\n"
    assert result.exit_code == 0 and not result.background_killed


async def test_cancel_during_the_exit_grace_kills_leftovers_and_keeps_the_exit_code(
    tmp_path: Path,
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=BOUND)
    cancel = asyncio.Event()
    seen = asyncio.Event()
    view: ShellOutputView | None = None

    def record(u: ShellOutputUpdate) -> None:
        nonlocal view
        view = apply_shell_output_update(view, u)
        if view.text.strip():
            seen.set()

    task = asyncio.create_task(
        env.exec("sleep 1000 & echo $$ $!; exit 4", cancel=cancel, on_update=record)
    )
    await asyncio.wait_for(seen.wait(), BOUND)
    assert view is not None
    shell_pid, child_pid = map(int, view.text.split())
    assert await exits(shell_pid)  # now exec is inside the exit grace
    cancel.set()
    result = await asyncio.wait_for(task, BOUND)
    assert result.cancelled and result.background_killed
    assert result.exit_code == 4  # the shell finished by itself
    assert await exits(child_pid)
