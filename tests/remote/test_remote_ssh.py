"""RemoteExecEnv over a real OpenSSH server on loopback: faults and the big-output bounds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sshd_fixture import SSHServer, read_pid, wait_gone
from toolfold.execenv import (
    CaptureOptions,
    RemoteExecEnv,
    ShellOutputLimits,
    ShellOutputUpdate,
    TransportError,
)

HERE = Path(__file__).resolve().parent


async def test_cancel_and_timeout_over_ssh_leave_no_remote_process(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    async with RemoteExecEnv(sshd_server.transport(), spill_dir=str(tmp_path)) as env:
        pid_file = tmp_path / "pid"
        cancel = asyncio.Event()
        task = asyncio.ensure_future(
            env.exec(f"seq 1 5; sleep 300 & echo $! > {pid_file}; wait", cancel=cancel)
        )
        pid = await asyncio.to_thread(read_pid, pid_file)
        cancel.set()
        result = await task
        assert result.cancelled and result.text == "1\n2\n3\n4\n5\n"
        assert await asyncio.to_thread(wait_gone, pid)

        pid_file.unlink()
        timed = await env.exec(f"echo partial; sleep 300 & echo $! > {pid_file}; wait", timeout=1)
        assert timed.timed_out and timed.exit_code is None and timed.text == "partial\n"
        assert await asyncio.to_thread(wait_gone, read_pid(pid_file))


async def test_kill_9_of_the_ssh_client_settles_with_partial_output_and_kills_remotely(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    updates: list[ShellOutputUpdate] = []
    env = RemoteExecEnv(sshd_server.transport(), spill_dir=str(tmp_path))
    try:
        task = asyncio.ensure_future(
            env.exec(
                # Ignores SIGTERM and SIGHUP: only the exec host's SIGKILL ends it.
                f"trap '' TERM HUP; echo $$ > {pid_file}; seq 1 3; while true; do sleep 0.2; done",
                on_update=updates.append,
            )
        )
        pid = await asyncio.to_thread(read_pid, pid_file)
        for _ in range(200):  # bounded: until the output has crossed
            if any(getattr(u, "text", "") or getattr(u, "output", None) for u in updates):
                break
            await asyncio.sleep(0.05)
        ssh_pid = env.process_pid
        assert ssh_pid is not None
        os.kill(ssh_pid, signal.SIGKILL)
        with pytest.raises(TransportError) as caught:
            await task
        message = str(caught.value)
        assert (
            "connection to the exec host (ssh " in message and "was lost while running" in message
        )
        partial = caught.value.partial
        assert partial is not None and partial.text == "1\n2\n3\n"
        # sshd closes the channel, the exec host's stdin closes, the group is killed.
        assert await asyncio.to_thread(wait_gone, pid, 30.0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(read_pid(pid_file), signal.SIGKILL)
        await env.aclose()


async def test_a_remote_host_without_toolfold_says_how_to_install_it(
    sshd_server: SSHServer,
) -> None:
    env = RemoteExecEnv(sshd_server.transport(remote_command="toolfold-missing-here exec-host"))
    with pytest.raises(TransportError) as caught:
        await env.exec("true")
    message = str(caught.value)
    assert f"toolfold exec-host is not installed on ssh {sshd_server.destination}" in message
    assert "command not found" in message
    assert "pip install --user toolfold" in message and "--remote-command" in message


def test_big_output_stays_on_the_remote_side(sshd_server: SSHServer, tmp_path: Path) -> None:
    """1 GB of output over ssh: the bytes that cross are bounded by the window times the
    number of updates, both sides' memory stays flat, and the remote spill is exact."""
    size = 1_000_000_000
    max_bytes = 50 * 1024
    child = subprocess.run(
        [
            sys.executable,
            str(HERE / "big_output_child.py"),
            json.dumps(
                {
                    "destination": sshd_server.destination,
                    "options": sshd_server.options,
                    "remote_command": sshd_server.transport().remote_command,
                    "spill_dir": str(tmp_path),
                    "command": f"yes 'a line of output' | head -c {size}",
                    "max_bytes": max_bytes,
                }
            ),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr
    stats = json.loads(child.stdout)
    assert stats["exit_code"] == 0 and stats["total_bytes"] == size, stats
    # Every update carries at most one window plus its metadata; the hello and the
    # result (which repeats the final view) are the only other messages.
    per_message = max_bytes * 1.1 + 2048
    assert stats["bytes_received"] <= (stats["updates"] + 3) * per_message, stats
    # And the updates are paced (at most one per min_interval, 0.1 s, plus the forced
    # spill-path and final ones), so the wire carries a rate, not the output: how many
    # bytes cross depends on how long the command runs, never on how much it prints.
    assert stats["updates"] <= stats["seconds"] / 0.1 + 4, stats
    # Memory: the client holds one view, the host one capture (and an 8 MiB spill buffer).
    assert stats["client_peak_growth"] < 64 * 1024 * 1024, stats
    assert stats["host_peak"] < 160 * 1024 * 1024, stats
    # The spill file on the exec host is the exact stream.
    spill = Path(stats["spill_path"])
    assert spill.parent == tmp_path and spill.stat().st_size == size
    check = subprocess.run(
        ["bash", "-c", f"yes 'a line of output' | head -c {size} | cmp - {spill}"],
        capture_output=True,
        timeout=300,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    spill.unlink()


def test_options_bound_the_window_the_host_applies(sshd_server: SSHServer, tmp_path: Path) -> None:
    async def main() -> None:
        async with RemoteExecEnv(sshd_server.transport(), spill_dir=str(tmp_path)) as env:
            r = await env.exec(
                "seq 1 1000",
                capture=CaptureOptions(limits=ShellOutputLimits(max_lines=3, retain="head")),
            )
            assert r.text == "1\n2\n3\n" and r.truncation.total_lines == 1000

    asyncio.run(main())
