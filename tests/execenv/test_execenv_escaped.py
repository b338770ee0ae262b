"""Processes that leave the command's process group (``setsid cmd &``), or are orphaned
by a parent that exits, are killed with the command on timeout, cancel and leftovers
after exit — and nothing else this process started is touched."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfold.execenv import LocalExecEnv, ShellOutputUpdate

BOUND = 60.0

# The escaped process prints its own pid, after setsid, then becomes `sleep`.
ESCAPE = "setsid sh -c 'echo $$; exec sleep 1000' &"


def gone(pid: int) -> bool:
    """Dead and reaped: no /proc entry at all (a zombie would still have one)."""
    return not Path(f"/proc/{pid}").exists()


def session_of(pid: int) -> int:
    return os.getsid(pid)


@pytest.fixture
def env(tmp_path: Path) -> LocalExecEnv:
    return LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)


@pytest.fixture
def spawned() -> Iterator[list[int]]:
    """Pids printed by the commands: killed at the end whatever happens."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def pids_in(text: str) -> list[int]:
    return [int(w) for w in text.split() if w.isdigit()]


async def test_a_setsid_process_does_not_survive_a_timeout(
    env: LocalExecEnv, spawned: list[int]
) -> None:
    result = await asyncio.wait_for(env.exec(f"{ESCAPE} wait", timeout=1.0), BOUND)
    spawned.extend(pids_in(result.text))
    [pid] = pids_in(result.text)
    assert result.timed_out
    assert gone(pid), f"escaped process {pid} survived the timeout"


async def test_a_setsid_process_does_not_survive_a_cancel(
    env: LocalExecEnv, spawned: list[int]
) -> None:
    cancel = asyncio.Event()
    seen: list[str] = []

    def on_update(update: ShellOutputUpdate) -> None:
        text = getattr(update, "text", None) or getattr(getattr(update, "output", None), "text", "")
        seen.append(text or "")
        if pids_in("".join(seen)):
            cancel.set()

    result = await asyncio.wait_for(
        env.exec(f"{ESCAPE} wait", cancel=cancel, on_update=on_update), BOUND
    )
    spawned.extend(pids_in(result.text))
    [pid] = pids_in(result.text)
    assert result.cancelled
    assert gone(pid), f"escaped process {pid} survived the cancel"


async def test_a_setsid_process_holding_the_output_does_not_survive_the_exit(
    env: LocalExecEnv, spawned: list[int]
) -> None:
    result = await asyncio.wait_for(env.exec(f"{ESCAPE} exit 3"), BOUND)
    spawned.extend(pids_in(result.text))
    [pid] = pids_in(result.text)
    assert result.exit_code == 3 and result.background_killed
    assert gone(pid), f"escaped process {pid} survived the shell's exit"


async def test_an_orphan_in_its_own_session_is_killed_on_timeout(
    env: LocalExecEnv, spawned: list[int]
) -> None:
    # The middle shell exits at once: `sleep` is orphaned (adopted by this process, the
    # subreaper), in another session, holding no pipe of ours.
    command = "setsid sh -c 'sleep 1000 > /dev/null 2>&1 & echo $!'; sleep 1000"
    result = await asyncio.wait_for(env.exec(command, timeout=1.0), BOUND)
    spawned.extend(pids_in(result.text))
    [pid] = pids_in(result.text)
    assert result.timed_out
    assert gone(pid), f"orphaned process {pid} survived the timeout"


async def test_other_children_of_this_process_are_left_alone(
    env: LocalExecEnv, spawned: list[int]
) -> None:
    bystander = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    try:
        result = await asyncio.wait_for(env.exec(f"{ESCAPE} wait", timeout=1.0), BOUND)
        spawned.extend(pids_in(result.text))
        assert result.timed_out and gone(pids_in(result.text)[0])
        assert bystander.poll() is None, "a process the command did not start was killed"
        assert session_of(bystander.pid) == bystander.pid
    finally:
        bystander.kill()
        bystander.wait()
