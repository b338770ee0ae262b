"""``kill -9`` of a ``toolfold mcp`` server while a command it left in the background
runs: the command outlives it (nothing could stop it), then ``toolfold resume`` stops it,
says so and records it: the call that recorded its output (checkpointed while it ran)
is settled as interrupted, with that output and the reason; no process of its group is
left, and a second resume finds nothing. A closed server stops its own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import signal
import subprocess
from pathlib import Path
from typing import Any

from mcp_helpers import TOOLFOLD, clean_env, lease_owners, poll, store_url

from sshd_fixture import wait_gone


def rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    while True:
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, f"no reply to {message!r} within 60 s"
        reply: dict[str, Any] = json.loads(proc.stdout.readline())
        if "id" in reply:
            return reply


def start_server(tmp_path: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        # Unconfined: a sandboxed command dies with its server (bwrap --die-with-parent),
        # so only an unconfined one can outlive a kill -9; and `echo $$` is then its pid.
        [*TOOLFOLD, "mcp", "--store", store_url(tmp_path), "--session", "s1", "--sandbox", "off"],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    init = {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    assert "result" in rpc(
        proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}
    )
    assert proc.stdin is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    return proc


def start_background(proc: subprocess.Popen[bytes]) -> tuple[str, int]:
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {
            "name": "bash",
            "arguments": {"command": "echo $$; exec sleep 1000", "yield_after": 0.5},
        },
    }
    reply = rpc(proc, call)
    structured = reply["result"]["structuredContent"]
    assert structured["details"]["running"] is True, reply
    text = reply["result"]["content"][0]["text"]
    return structured["details"]["handle"], int(text.split()[0])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def group_members(pgid: int) -> list[int]:
    """Processes of process group ``pgid`` that are not zombies."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(name))
    return found


def toolfold(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*TOOLFOLD, *args, "--store", store_url(tmp_path)],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def background_call(tmp_path: Path) -> str | None:
    """The id of the call recording a background command's output, once recorded."""
    calls = json.loads(toolfold(tmp_path, "show", "s1", "--json").stdout)
    return next((c["tool_call_id"] for c in calls if c["tool_name"] == "background"), None)


def reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # adopted by this process, or by init
        os.waitpid(pid, os.WNOHANG)


def test_kill_9_of_the_server_then_resume_stops_the_background_command(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    pid = 0
    try:
        handle, pid = start_background(proc)
        # While it runs, the call recording its output is in the store, checkpointed.
        bg = poll(lambda: background_call(tmp_path), "the background call to be recorded")
        assert bg.endswith(f".{handle}")
        poll(
            lambda: f"{pid}\n" in toolfold(tmp_path, "show", "s1", bg).stdout,
            "the background call's output to be checkpointed",
        )
        # ... and leased by the server, like every call it runs (the only open operation).
        [owner] = asyncio.run(lease_owners(tmp_path))
        assert owner != "-" and owner.endswith(f":{proc.pid}"), owner
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert alive(pid), "the background command died with the server: nothing to test"
        assert group_members(pid) == [pid]
        ledger = tmp_path / "store" / "spill" / "s1" / "background.json"
        [entry] = json.loads(ledger.read_text())
        assert entry["handle"] == handle and entry["owner_pid"] == proc.pid
        assert ledger.stat().st_mode & 0o777 == 0o600
        resumed = subprocess.run(
            [*TOOLFOLD, "resume", "s1", "--store", store_url(tmp_path)],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        assert (
            f"background command {handle} ('echo $$; exec sleep 1000') was left running by "
            f"process {proc.pid}, which ended without stopping it: stopped it (killed pid {pid})"
        ) in resumed.stdout
        assert f"{bg} (background): output of background command {handle} of call " in (
            resumed.stdout
        )
        assert wait_gone(pid)
        reap(pid)
        assert group_members(pid) == []
        # The store says what happened to it: interrupted, its output kept, and why.
        settled = json.loads(toolfold(tmp_path, "show", "s1", bg, "--json").stdout)
        assert settled["kind"] == "background" and settled["outcome"] == "interrupted"
        reason = (
            f"[Background command {handle}: process {proc.pid}, which followed it, ended "
            f"without stopping it; it was stopped after the crash (killed pid {pid}).]"
        )
        assert settled["details"]["interrupted"] == reason
        assert settled["details"]["started_by"] == bg.removesuffix(f".{handle}")
        text = settled["content"][0]["text"]
        assert text.startswith(f"{pid}\n") and reason in text
        shown = toolfold(tmp_path, "show", "s1")
        rows = [line.split()[1:4] for line in shown.stdout.splitlines()]
        assert [bg, "background", "interrupted"] in rows
        again = subprocess.run(
            [*TOOLFOLD, "resume", "s1", "--store", store_url(tmp_path)],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "nothing to resume" in again.stdout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_server_that_closes_stops_its_background_commands(tmp_path: Path) -> None:
    proc = start_server(tmp_path)
    pid = 0
    try:
        handle, pid = start_background(proc)
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert wait_gone(pid)
        assert f"stopped background command {handle}" in proc.stderr.read().decode()
        assert not (tmp_path / "store" / "spill" / "s1" / "background.json").exists()
        # The call that recorded its output settled, saying the server's closing stopped it.
        bg = background_call(tmp_path)
        assert bg is not None
        closed = json.loads(toolfold(tmp_path, "show", "s1", bg, "--json").stdout)
        assert closed["details"]["ended"] == "closed" and closed["outcome"] == "error"
        assert closed["content"][0]["text"].endswith(
            f"[{handle} was stopped: its execution environment closed]"
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)
