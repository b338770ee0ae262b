"""``toolfold serve`` on a store: commands posted to a lane are durable calls of the
session of that name, readable with ``toolfold show`` and the calls API."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import httpx
from cli_helpers import AUTH, serve, toolfold, wait_for


def test_serve_commands_land_in_the_store_and_show_lists_them(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'toolfold.db'}"
    made = toolfold("run", "--store", url, "--session", "seen", "--", "seq 1 3000", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proc, base = serve(url, tmp_path)

    def settled() -> Any:
        body = httpx.get(f"{base}/v1/sessions/build/calls", headers=AUTH, timeout=5).json()
        calls = body.get("calls") or []
        return calls if calls and calls[0]["settled"] else None

    try:
        # A call made by `toolfold run` carries its truncation totals and spill file.
        [seen] = httpx.get(f"{base}/v1/sessions/seen/calls", headers=AUTH, timeout=5).json()[
            "calls"
        ]
        assert seen["truncation"]["total_lines"] == 3000 and seen["truncation"]["truncated"]
        assert Path(seen["spill_path"]).parent == tmp_path / "spill" / "seen"
        r = httpx.post(
            f"{base}/v1/lanes/build/commands",
            json={"command": "echo built; pwd"},
            headers=AUTH,
            timeout=5,
        )
        assert r.status_code == 202, r.text
        call_id = r.json()["tool_call_id"]
        [call] = wait_for(settled, "the posted command to settle", proc=proc)
        assert call["tool_call_id"] == call_id and call["status"] == "ok"
        # It ran in serve's working directory, like `toolfold run`.
        assert call["message"]["content"][0]["text"] == f"built\n{tmp_path}\n"
        os.kill(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err

    listed = toolfold("sessions", "--store", url, cwd=tmp_path)
    assert listed.returncode == 0 and "build" in listed.stdout and "seen" in listed.stdout
    shown = toolfold("show", "build", "--store", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert call_id in shown.stdout and "echo built; pwd" in shown.stdout
    one = toolfold("show", "build", "1", "--store", url, cwd=tmp_path)
    assert one.returncode == 0 and one.stdout == f"built\n{tmp_path}\n"
    # Nothing is left to resume: the call settled.
    resumed = toolfold("resume", "build", "--store", url, cwd=tmp_path)
    assert resumed.returncode == 0 and "nothing to resume" in resumed.stdout


def _pending(base: str) -> Any:
    calls = (
        httpx.get(f"{base}/v1/sessions/build/calls", headers=AUTH, timeout=5).json().get("calls")
        or []
    )
    state = calls[0].get("state") if calls else None
    return calls[0] if state and "started" in state["content"][0]["text"] else None


def test_a_command_a_killed_server_left_running_is_shown_pending_and_resumes(
    tmp_path: Path,
) -> None:
    url = f"sqlite:{tmp_path / 'toolfold.db'}"
    # The command runs in its own process group, so killing the server leaves it
    # orphaned: it ends once the gate file appears (the test writes it at the end).
    gate = tmp_path / "gate"
    command = f"echo started; while [ ! -e {gate} ]; do sleep 0.05; done"
    try:
        proc, base = serve(url, tmp_path)
        try:
            r = httpx.post(
                f"{base}/v1/lanes/build/commands",
                json={"command": command},
                headers=AUTH,
                timeout=5,
            )
            assert r.status_code == 202, r.text
            call = wait_for(lambda: _pending(base), "the first line to be checkpointed", proc=proc)
            assert call["running"] is True
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the server: a crash, no cleanup
            proc.wait()

        again, base = serve(url, tmp_path)
        try:
            gate.write_text("go")
            call = _pending(base)
            assert call is not None and call["settled"] is False and call["running"] is False
            assert call["status"] == "unsettled" and call["command"] == command
            os.kill(again.pid, signal.SIGINT)
            again.communicate(timeout=30)
        finally:
            if again.poll() is None:
                os.killpg(again.pid, signal.SIGKILL)
                again.wait()
        resumed = toolfold("resume", "build", "--store", url, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert "settled from its last checkpoint as interrupted" in resumed.stdout
        one = toolfold("show", "build", "1", "--store", url, cwd=tmp_path)
        assert one.returncode == 0 and one.stdout.startswith("started\n")
        assert "interrupted before it finished" in one.stdout
    finally:
        gate.write_text("go")  # ends the orphaned command whatever happened
