"""``kill -9`` of the exec host itself: the commands it runs — a background command and
what it forked, one on a pseudo-terminal, and a command still in its first call — die
with it, through the container-style transport and over a real OpenSSH server, and so do
a sandboxing host's; and a host that ends normally leaves what a finished command started
on purpose."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from sshd_fixture import EXEC_HOST, SSHServer, local_transport, read_pid, wait_gone
from toolfold.execenv import CommandTransport, RemoteExecEnv, Transport

BOUND = 60.0


def live_in_group(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that have not exited (zombies left out)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            found.append(int(name))
    return found


def group_gone(pgid: int, bound: float = BOUND) -> bool:
    """Poll the process table (bounded) until group ``pgid`` has no live process."""
    deadline = time.monotonic() + bound
    while live_in_group(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


async def kill_host_while_running(transport: Transport, tmp_path: Path) -> None:
    env = RemoteExecEnv(transport, spill_dir=str(tmp_path))
    try:
        host = await env.connect()
        # A background command whose shell forked two more processes, and a command
        # still in its first call (no yield): both keep running until the host dies.
        started = await asyncio.wait_for(
            env.exec(f"sleep 1000 & sleep 1000 & echo $$ > {tmp_path}/bg; wait", yield_after=0.3),
            BOUND,
        )
        assert started.handle is not None
        # One on a pseudo-terminal too (its controlling terminal is the host's pty).
        on_tty = await asyncio.wait_for(
            env.exec(f"sleep 1000 & echo $$ > {tmp_path}/tty; wait", yield_after=0.3, tty=True),
            BOUND,
        )
        assert on_tty.handle is not None
        foreground = asyncio.ensure_future(
            env.exec(f"sleep 1000 & echo $$ > {tmp_path}/fg; wait; echo never")
        )
        groups = [
            await asyncio.to_thread(read_pid, tmp_path / name) for name in ("bg", "tty", "fg")
        ]
        for pgid in groups:
            assert len(live_in_group(pgid)) >= 2, pgid  # the shell and its sleep(s)
        os.kill(host.pid, signal.SIGKILL)
        assert await asyncio.to_thread(wait_gone, host.pid)
        for pgid in groups:
            assert await asyncio.to_thread(group_gone, pgid), live_in_group(pgid)
        foreground.cancel()
        with pytest.raises((asyncio.CancelledError, Exception)):
            await foreground
    finally:
        await env.aclose()


async def test_kill_9_of_the_exec_host_kills_its_commands(tmp_path: Path) -> None:
    await kill_host_while_running(local_transport(), tmp_path)


async def test_kill_9_of_the_exec_host_over_ssh_kills_its_commands(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    await kill_host_while_running(sshd_server.transport(), tmp_path)


async def test_a_host_that_ends_normally_leaves_what_a_command_started_on_purpose(
    tmp_path: Path,
) -> None:
    async with RemoteExecEnv(local_transport(), spill_dir=str(tmp_path)) as env:
        # A daemon: its own session, output redirected, so the command ends by itself.
        result = await env.exec(
            f"setsid sleep 1000 > /dev/null 2>&1 < /dev/null & echo $! > {tmp_path}/daemon"
        )
        assert result.exit_code == 0
    daemon = read_pid(tmp_path / "daemon")
    try:
        # The host has exited (aclose waited for it) and its guard left: the daemon is
        # still there.
        os.kill(daemon, 0)
        with open(f"/proc/{daemon}/stat", "rb") as f:
            assert f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    finally:
        os.kill(daemon, signal.SIGKILL)


def with_token(token: str) -> list[int]:
    """The live processes whose command line holds ``token``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        found.append(int(name))
            except OSError:
                continue
    return [pid for pid in found if pid != os.getpid() and pid_alive(pid)]


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


async def test_kill_9_of_a_sandboxing_exec_host_ends_its_sandboxes(tmp_path: Path) -> None:
    # In the sandbox $$ is a pid of its own namespace: the processes are found by a
    # token on their command line instead.
    token = f"{1000 + os.getpid() % 1000}.{int.from_bytes(os.urandom(3), 'big')}"
    transport = CommandTransport(["env"], remote_command=f"{EXEC_HOST} --sandbox read-only")
    env = RemoteExecEnv(transport, spill_dir=str(tmp_path))
    try:
        host = await env.connect()
        started = await asyncio.wait_for(
            env.exec(f"sleep {token} & echo started; wait", yield_after=0.3), BOUND
        )
        assert started.handle is not None
        deadline = time.monotonic() + BOUND
        while not with_token(token):
            assert time.monotonic() < deadline, "the sandboxed sleep never showed up"
            await asyncio.sleep(0.02)
        os.kill(host.pid, signal.SIGKILL)
        assert await asyncio.to_thread(wait_gone, host.pid)
        while with_token(token):
            assert time.monotonic() < deadline, with_token(token)
            await asyncio.sleep(0.02)
    finally:
        await env.aclose()
