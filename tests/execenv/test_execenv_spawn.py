"""How LocalExecEnv starts a shell and learns its exit: through a pidfd on the loop where
Linux has one (no thread per command), through asyncio's subprocess path elsewhere.
Both must report the same exits."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfold.execenv import ExecStartError, LocalExecEnv, _spawn

BOUND = 60.0


@pytest.fixture(params=["pidfd", "asyncio"])
def watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param == "pidfd":
        if not _spawn.pidfd_supported():
            pytest.fail("this kernel has no pidfd_open (Linux 5.3+); the fast path is untested")
    else:
        monkeypatch.setattr(_spawn, "_pidfd", False)
    yield request.param


async def test_exit_codes_signals_and_timeouts_are_reported_alike(
    watch: str, tmp_path: Path
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5)
    ok = await asyncio.wait_for(env.exec("echo hi"), BOUND)
    assert (ok.exit_code, ok.text) == (0, "hi\n")
    failed = await asyncio.wait_for(env.exec("exit 3"), BOUND)
    assert failed.exit_code == 3
    # Killed by a signal from elsewhere: no exit code, and not one of our kills.
    killed = await asyncio.wait_for(env.exec("kill -KILL $$"), BOUND)
    assert killed.exit_code is None and not killed.timed_out and not killed.cancelled
    late = await asyncio.wait_for(env.exec("sleep 1000", timeout=0.2), BOUND)
    assert late.exit_code is None and late.timed_out


async def test_a_shell_that_cannot_start_is_an_exec_start_error(watch: str, tmp_path: Path) -> None:
    env = LocalExecEnv(tmp_path / "spill")
    with pytest.raises(ExecStartError, match="check that the shell exists and cwd is a directory"):
        await env.exec("true", cwd=tmp_path / "missing")
    env = LocalExecEnv(tmp_path / "spill", shell=str(tmp_path / "no-shell"))
    with pytest.raises(ExecStartError, match="no-shell"):
        await env.exec("true")
    # Nothing leaked: the next command runs.
    assert (await LocalExecEnv(tmp_path / "spill").exec("true")).exit_code == 0


async def test_the_pidfd_path_starts_no_thread_per_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not _spawn.pidfd_supported():
        pytest.fail("this kernel has no pidfd_open (Linux 5.3+); the fast path is untested")
    started: list[str] = []
    real_start = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    env = LocalExecEnv(tmp_path / "spill")
    await env.exec("true")  # anything started once (an executor) is not per command
    monkeypatch.setattr(threading.Thread, "start", counting_start)
    for _ in range(3):
        assert (await asyncio.wait_for(env.exec("exit 7"), BOUND)).exit_code == 7
    assert started == []


async def test_a_sandboxed_command_leaves_no_process_behind(watch: str, tmp_path: Path) -> None:
    # The sandbox's init, adopted by us when bwrap exits, is killed and reaped (on its
    # pidfd, or in a thread): no child of ours is left, not even a zombie.
    from toolfold.execenv import Sandbox
    from toolfold.execenv._reaper import _children

    env = LocalExecEnv(tmp_path / "spill", sandbox=Sandbox("workspace-write"))
    before = set(_children(os.getpid()))
    for command in ("true", "sleep 1000 & echo started", "exit 4"):
        result = await asyncio.wait_for(env.exec(command, cwd=tmp_path), BOUND)
        assert result.exit_code == (4 if command == "exit 4" else 0)
    assert set(_children(os.getpid())) <= before
