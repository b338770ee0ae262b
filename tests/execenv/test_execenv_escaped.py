"""Processes that leave the command's process group (``setsid cmd &``), or are orphaned
by a parent that exits, are killed with the command on timeout, cancel and leftovers
after exit — and nothing else this process started is touched."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox_escapes import PID_RECORD, record_pid
from toolfold.execenv import LocalExecEnv, Sandbox, ShellOutputUpdate

BOUND = 60.0

# The escaped process prints its own pid (with its pid namespace: inside a sandbox the
# pid is the namespace's own), after setsid, then becomes `sleep`.
ESCAPE = f"setsid sh -c 'echo $$ {PID_RECORD}; exec sleep 1000' &"


def gone(record: str) -> bool:
    """Dead and reaped: no /proc entry at all (a zombie would still have one)."""
    return record_pid(record) is None


def session_of(pid: int) -> int:
    return os.getsid(pid)


@pytest.fixture
def env(tmp_path: Path, sandbox: Sandbox | None) -> LocalExecEnv:
    return LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2, sandbox=sandbox)


@pytest.fixture
def host_env(tmp_path: Path) -> LocalExecEnv:
    return LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)


@pytest.fixture
def spawned() -> Iterator[list[str]]:
    """Pid records printed by the commands: killed at the end whatever happens."""
    records: list[str] = []
    yield records
    for record in records:
        pid = record_pid(record)
        if pid is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def pids_in(text: str) -> list[str]:
    """The ``PID NS`` records in a command's output."""
    return re.findall(r"\d+ pid:\[\d+\]", text)


async def test_a_setsid_process_does_not_survive_a_timeout(
    env: LocalExecEnv, spawned: list[str]
) -> None:
    result = await asyncio.wait_for(env.exec(f"{ESCAPE} wait", timeout=1.0), BOUND)
    spawned.extend(pids_in(result.text))
    [pid] = pids_in(result.text)
    assert result.timed_out
    assert gone(pid), f"escaped process {pid} survived the timeout"


async def test_a_setsid_process_does_not_survive_a_cancel(
    env: LocalExecEnv, spawned: list[str]
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


# Unconfined only: in a sandbox the namespace dies with the shell, before the escaped
# process can print or hold the output (sandbox_escapes' setsid-outlives checks that).
async def test_a_setsid_process_holding_the_output_does_not_survive_the_exit(
    host_env: LocalExecEnv, spawned: list[str]
) -> None:
    result = await asyncio.wait_for(host_env.exec(f"{ESCAPE} exit 3"), BOUND)
    spawned.extend(pids_in(result.text))
    [pid] = pids_in(result.text)
    assert result.exit_code == 3 and result.background_killed
    assert gone(pid), f"escaped process {pid} survived the shell's exit"


async def test_an_orphan_in_its_own_session_is_killed_on_timeout(
    env: LocalExecEnv, spawned: list[str]
) -> None:
    # The middle shell exits at once: `sleep` is orphaned (adopted by this process, the
    # subreaper), in another session, holding no pipe of ours.
    command = f"setsid sh -c 'sleep 1000 > /dev/null 2>&1 & echo $! {PID_RECORD}'; sleep 1000"
    result = await asyncio.wait_for(env.exec(command, timeout=1.0), BOUND)
    spawned.extend(pids_in(result.text))
    [pid] = pids_in(result.text)
    assert result.timed_out
    assert gone(pid), f"orphaned process {pid} survived the timeout"


async def test_other_children_of_this_process_are_left_alone(
    env: LocalExecEnv, spawned: list[str]
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
