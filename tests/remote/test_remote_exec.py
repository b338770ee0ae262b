"""RemoteExecEnv through the container-style command-prefix transport, and the exec host.

``docker exec -i C`` cannot run here, so the prefix is a stand-in (``env``), which
takes the same path: a local process whose stdin/stdout are ``toolfold exec-host``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sshd_fixture import local_transport, read_pid, wait_gone
from toolfold.execenv import (
    PROTOCOL_VERSION,
    CallbackError,
    CaptureOptions,
    CommandTransport,
    ExecError,
    ExecStartError,
    LocalExecEnv,
    ProtocolError,
    RemoteExecEnv,
    ShellOutputLimits,
    ShellOutputUpdate,
    ShellOutputView,
    TransportError,
    apply_shell_output_update,
)

SMALL = CaptureOptions(limits=ShellOutputLimits(max_bytes=2000, max_lines=40))


def fold(updates: list[ShellOutputUpdate]) -> ShellOutputView | None:
    view = None
    for u in updates:
        view = apply_shell_output_update(view, u)
    return view


async def test_remote_exec_gives_what_local_exec_gives(tmp_path: Path) -> None:
    command = "for i in $(seq 1 3000); do printf 'line %d \\033[31mred\\033[0m é\\n' $i; done; echo err >&2"
    remote_updates: list[ShellOutputUpdate] = []
    async with RemoteExecEnv(local_transport(), spill_dir=str(tmp_path / "rspill")) as env:
        remote = await env.exec(command, capture=SMALL, on_update=remote_updates.append)
        assert env.host is not None and env.host.protocol == PROTOCOL_VERSION
    local = await LocalExecEnv(tmp_path / "lspill").exec(command, capture=SMALL)
    assert remote.exit_code == local.exit_code == 0
    assert remote.text == local.text and remote.truncation == local.truncation
    assert fold(remote_updates) == remote.view
    # The spill file is on the exec host's side and holds the exact raw stream.
    assert remote.spill_path is not None and local.spill_path is not None
    assert remote.spill_path.startswith(str(tmp_path / "rspill"))
    assert Path(remote.spill_path).read_bytes() == Path(local.spill_path).read_bytes()


async def test_remote_head_tail_gives_what_local_head_tail_gives(tmp_path: Path) -> None:
    # The mode, its share and its cut cross the exec host's wire: the same view, the
    # same cut record, and the updates (slides at the cut) fold to it.
    command = "echo 'error: first'; seq -f 'line %06g' 1 3000; echo 'summary: done'"
    capture = CaptureOptions(
        limits=ShellOutputLimits(max_bytes=2000, max_lines=100, retain="head_tail", head_share=0.3)
    )
    updates: list[ShellOutputUpdate] = []
    async with RemoteExecEnv(local_transport(), spill_dir=str(tmp_path / "rspill")) as env:
        remote = await env.exec(command, capture=capture, on_update=updates.append)
    local = await LocalExecEnv(tmp_path / "lspill").exec(command, capture=capture)
    assert remote.text == local.text and remote.truncation == local.truncation
    t = remote.truncation
    assert t.cut_at is not None and remote.text[: t.cut_at].startswith("error: first\n")
    assert t.cut_line == 31 and remote.text.endswith("summary: done\n")
    assert fold(updates) == remote.view


async def test_start_errors_come_back_as_the_same_class(tmp_path: Path) -> None:
    async with RemoteExecEnv(local_transport()) as env:
        with pytest.raises(ExecStartError, match="missing-dir"):
            await env.exec("true", cwd=tmp_path / "missing-dir")
        # One bad call does not break the connection for the next.
        ok = await env.exec("echo still here")
        assert ok.text == "still here\n"


async def test_concurrent_commands_share_one_connection(tmp_path: Path) -> None:
    async with RemoteExecEnv(local_transport()) as env:
        results = await asyncio.gather(*(env.exec(f"sleep 0.2; echo {i}") for i in range(4)))
        assert [r.text for r in results] == [f"{i}\n" for i in range(4)]


async def test_cancel_and_timeout_kill_the_remote_group_and_keep_output(tmp_path: Path) -> None:
    async with RemoteExecEnv(local_transport(), spill_dir=str(tmp_path)) as env:
        cancel = asyncio.Event()
        pid_file = tmp_path / "pid"
        updates: list[ShellOutputUpdate] = []
        task = asyncio.ensure_future(
            env.exec(
                f"echo started; sleep 300 & echo $! > {pid_file}; wait",
                cancel=cancel,
                on_update=updates.append,
            )
        )
        pid = await asyncio.to_thread(read_pid, pid_file)
        cancel.set()
        result = await task
        assert result.cancelled and result.exit_code is None
        assert result.text == "started\n" and fold(updates) == result.view
        assert await asyncio.to_thread(wait_gone, pid)

        pid_file.unlink()
        timed = await env.exec(f"echo go; sleep 300 & echo $! > {pid_file}; wait", timeout=1)
        assert timed.timed_out and timed.text == "go\n"
        assert await asyncio.to_thread(wait_gone, read_pid(pid_file))


async def test_task_cancellation_stops_the_remote_command(tmp_path: Path) -> None:
    async with RemoteExecEnv(local_transport()) as env:
        pid_file = tmp_path / "pid"
        updates: list[ShellOutputUpdate] = []
        task = asyncio.ensure_future(
            env.exec(f"echo $$ > {pid_file}; echo hi; sleep 300", on_update=updates.append)
        )
        pid = await asyncio.to_thread(read_pid, pid_file)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await asyncio.to_thread(wait_gone, pid)
        view = fold(updates)
        assert view is not None and view.text == "hi\n"


async def test_a_failing_consumer_stops_the_remote_command(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def explode(update: ShellOutputUpdate) -> None:
        if pid_file.exists():
            raise RuntimeError("sink is gone")

    async with RemoteExecEnv(local_transport()) as env:
        with pytest.raises(CallbackError, match="sink is gone"):
            await env.exec(
                f"echo $$ > {pid_file}; while true; do echo tick; sleep 0.05; done",
                on_update=explode,
            )
        assert await asyncio.to_thread(wait_gone, read_pid(pid_file))


async def test_a_host_without_toolfold_says_how_to_install_it() -> None:
    env = RemoteExecEnv(CommandTransport(["env"], remote_command="toolfold-not-here exec-host"))
    with pytest.raises(TransportError) as caught:
        await env.exec("true")
    message = str(caught.value)
    assert "toolfold exec-host is not installed on env" in message
    assert "pip install toolfold" in message and "full path of the remote command" in message
    assert "No such file or directory" in message


async def test_an_older_or_newer_host_is_refused_naming_both_versions() -> None:
    hello = json.dumps({"op": "hello", "protocol": 99, "toolfold": "9.9.9"})
    fake = CommandTransport(["sh", "-c", f"echo '{hello}'; cat > /dev/null"], remote_command="")
    with pytest.raises(ProtocolError) as caught:
        await RemoteExecEnv(fake).exec("true")
    message = str(caught.value)
    assert (
        "protocol version 99" in message
        and f"this side speaks version {PROTOCOL_VERSION}" in message
    )
    assert "9.9.9" in message


def test_the_host_refuses_a_client_of_another_version_naming_both() -> None:
    host = subprocess.run(
        [sys.executable, "-m", "toolfold.cli", "exec-host"],
        input=json.dumps({"op": "hello", "protocol": 99}) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert host.returncode == 2
    hello, refusal = (json.loads(line) for line in host.stdout.splitlines())
    assert hello["op"] == "hello" and hello["protocol"] == PROTOCOL_VERSION
    assert refusal["op"] == "error" and refusal["kind"] == "ProtocolError"
    assert f"protocol version {PROTOCOL_VERSION}" in refusal["message"]
    assert "the client sent 99" in refusal["message"]


def test_closing_the_hosts_stdin_kills_its_commands(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    host = subprocess.Popen(
        [sys.executable, "-m", "toolfold.cli", "exec-host", "--spill-dir", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert host.stdin is not None and host.stdout is not None
        assert json.loads(host.stdout.readline())["op"] == "hello"
        requests: list[dict[str, Any]] = [
            {"op": "hello", "protocol": PROTOCOL_VERSION},
            {
                "op": "exec",
                "id": 1,
                "command": f"trap '' TERM; sleep 300 & echo $! > {pid_file}; wait",
                "capture": {
                    "max_bytes": 100,
                    "max_lines": 10,
                    "retain": "tail",
                    "spill": True,
                    "min_interval": 0.1,
                    "target_rate": 1000.0,
                    "spill_high_water": 1 << 20,
                },
            },
        ]
        host.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
        host.stdin.flush()
        pid = read_pid(pid_file)
        host.stdin.close()  # the client is gone
        assert host.wait(timeout=30) == 0
        assert wait_gone(pid)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


async def test_the_host_dying_mid_command_settles_with_partial_output(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    updates: list[ShellOutputUpdate] = []
    env = RemoteExecEnv(local_transport())
    task = asyncio.ensure_future(
        env.exec(
            f"echo $$ > {pid_file}; echo partial; exec sleep 300",
            on_update=updates.append,
        )
    )
    pid = await asyncio.to_thread(read_pid, pid_file)
    try:
        await asyncio.to_thread(_wait_update, updates)
        host = env.host
        assert host is not None
        os.kill(host.pid, signal.SIGKILL)  # the container died under us
        with pytest.raises(TransportError) as caught:
            await task
        assert "was lost while running" in str(caught.value)
        assert "the output received so far is kept" in str(caught.value)
        partial = caught.value.partial
        assert partial is not None and partial.text == "partial\n"
        # The next call starts a fresh connection.
        assert (await env.exec("echo again")).text == "again\n"
    finally:
        # A SIGKILLed host cannot kill its commands (in a container they die with it).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        await env.aclose()


def _wait_update(updates: list[ShellOutputUpdate]) -> None:
    import time

    for _ in range(400):
        view = fold(list(updates))
        if view is not None and view.text:
            return
        time.sleep(0.05)
    raise AssertionError("no update arrived")


async def test_a_host_sending_an_endless_line_is_cut_off_not_buffered() -> None:
    # A broken (or hostile) exec host must not make the client buffer without bound:
    # past MAX_LINE_BYTES the connection is dropped with a ProtocolError.
    hello = json.dumps(
        {
            "op": "hello",
            "protocol": PROTOCOL_VERSION,
            "toolfold": "x",
            "pid": 1,
            "python": "py",
            "cwd": "/",
            "spill_dir": "/",
        }
    )
    flood = (
        "import sys; sys.stdout.write(sys.argv[1] + '\\n'); sys.stdout.flush(); "
        "sys.stdin.readline(); chunk = 'x' * (1 << 20)\n"
        "while True: sys.stdout.write(chunk)"
    )
    fake = CommandTransport([sys.executable, "-c", flood, hello], remote_command="")
    env = RemoteExecEnv(fake, stop_timeout=2)  # the fake ignores its closed stdin
    try:
        with pytest.raises(TransportError, match="longer than 67108864 bytes"):
            await env.exec("true")
    finally:
        await env.aclose()


def test_the_host_closes_on_an_endless_request_instead_of_buffering_it(tmp_path: Path) -> None:
    # The host's side of the same bound: a request line past MAX_LINE_BYTES ends the
    # session (its commands are killed like on a closed stdin) — memory stays bounded.
    pid_file = tmp_path / "pid"
    host = subprocess.Popen(
        [sys.executable, "-m", "toolfold.cli", "exec-host", "--spill-dir", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert host.stdin is not None and host.stdout is not None
        assert json.loads(host.stdout.readline())["op"] == "hello"
        first = [
            {"op": "hello", "protocol": PROTOCOL_VERSION},
            {
                "op": "exec",
                "id": 1,
                "command": f"echo $$ > {pid_file}; exec sleep 300",
                "capture": {
                    "max_bytes": 100,
                    "max_lines": 10,
                    "retain": "tail",
                    "spill": False,
                    "min_interval": 0.1,
                    "target_rate": 1000.0,
                    "spill_high_water": 1 << 20,
                },
            },
        ]
        host.stdin.write("".join(json.dumps(r) + "\n" for r in first).encode())
        host.stdin.flush()
        pid = read_pid(pid_file)
        chunk = b"x" * (1 << 20)
        with contextlib.suppress(BrokenPipeError):
            for _ in range(80):  # 80 MiB without a newline: past the 64 MiB bound
                host.stdin.write(chunk)
            host.stdin.flush()
        assert host.wait(timeout=60) == 0
        assert wait_gone(pid)
        assert b"a request longer than 67108864 bytes" in host.communicate()[1]
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


async def test_the_remote_host_honours_the_clients_max_spill(tmp_path: Path) -> None:
    # 3 MB of output under a 1 MiB cap: the host's spill file keeps exactly the first
    # 1 MiB, and the result says why, as a local exec does.
    capped = dataclasses.replace(SMALL, max_spill=1 << 20)
    command = "yes | head -c 3000000"
    async with RemoteExecEnv(local_transport(), spill_dir=str(tmp_path / "rspill")) as env:
        remote = await env.exec(command, capture=capped)
    local = await LocalExecEnv(tmp_path / "lspill").exec(command, capture=capped)
    assert remote.spill_path is not None and local.spill_path is not None
    assert Path(remote.spill_path).read_bytes() == (b"y\n" * 1_500_000)[: 1 << 20]
    assert remote.text == local.text and remote.truncation == local.truncation
    assert (
        remote.spill_note
        == local.spill_note
        == ("the first 1.0 MiB only: the spill cap (max_spill)")
    )


def test_a_request_nested_200k_deep_is_refused_in_one_line_not_a_traceback(
    tmp_path: Path,
) -> None:
    host = subprocess.Popen(
        [sys.executable, "-m", "toolfold.cli", "exec-host", "--spill-dir", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert host.stdin is not None and host.stdout is not None
        assert json.loads(host.stdout.readline())["op"] == "hello"
        deep = b'{"op":"exec","id":1,"x":' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
        hello = json.dumps({"op": "hello", "protocol": PROTOCOL_VERSION}).encode() + b"\n"
        _, err = host.communicate(hello + deep, timeout=60)
        assert host.returncode == 0
        assert err.decode() == (
            "toolfold exec-host: a JSON message nested too deep to read (the protocol's "
            """messages are flat), starting b'{"op":"exec","id":1,"x":[[[[[[[[[[[[[[[[';"""
            " closing\n"
        )
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


async def test_every_bad_request_gets_an_answer_and_the_connection_lives_on(tmp_path: Path) -> None:
    # Each of these used to be able to crash a request task on the host without a reply,
    # leaving the caller waiting forever.
    async with RemoteExecEnv(local_transport()) as env:
        with pytest.raises(ExecError, match="embedded null byte"):
            await env.call("stat", {"path": "a\0b"})
        with pytest.raises(ExecError, match="'max_bytes' must be a positive integer"):
            await env.call("read_lines", {"path": str(tmp_path), "max_bytes": 1.5, "max_lines": 2})
        with pytest.raises(ExecError, match="unknown file operation 'rm'"):
            await env.call("rm", {"path": "/"})
        with pytest.raises(ExecError, match="null byte"):
            await env.exec("echo a\0b")
        assert (await env.exec("echo fine")).text == "fine\n"


async def test_a_cancel_set_before_exec_still_stops_the_command() -> None:
    # The cancel request follows the exec request at once; the host must not lose it
    # because the command's task had not started yet.
    cancel = asyncio.Event()
    cancel.set()
    async with RemoteExecEnv(local_transport()) as env:
        result = await asyncio.wait_for(env.exec("sleep 300", cancel=cancel), 60)
        assert result.cancelled and result.exit_code is None
