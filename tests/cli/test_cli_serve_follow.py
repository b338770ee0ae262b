"""``toolfold run --session S`` in one process shows up live in a running ``toolfold serve``:
lane S follows stored session S, its text growing with each durable checkpoint — on
every backend another process can write (SQLite, JSONL, PostgreSQL): two real processes
and one SSE subscriber."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import AUTH, serve, start, wait_for
from cli_helpers import lane_call as _call
from cli_helpers import lane_text as _text
from cli_helpers import sse_values as _replica
from cli_helpers import until as _until


@pytest.fixture(params=["sqlite", "jsonl", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'toolfold.db'}"
    if request.param == "jsonl":
        return f"jsonl:{tmp_path / 'sessions'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def test_a_run_in_another_process_shows_up_live_in_serve(store: str, tmp_path: Path) -> None:
    url = store
    gate1, gate2 = tmp_path / "gate1", tmp_path / "gate2"
    command = (
        f"echo first-line; while [ ! -e {gate1} ]; do sleep 0.05; done; "
        f"echo second-line; while [ ! -e {gate2} ]; do sleep 0.05; done; echo last-line"
    )
    proc, base = serve(url, tmp_path)
    run: Any = None
    try:
        r = httpx.get(f"{base}/v1/lanes/nothing/state", headers=AUTH, timeout=5)
        assert r.status_code == 404
        assert "no lane or stored session named 'nothing'" in r.json()["error"]

        run = start("run", "--store", url, "--session", "live", "--", command, cwd=tmp_path)

        def listed() -> bool:
            body = httpx.get(f"{base}/v1/sessions", headers=AUTH, timeout=5).json()
            return "live" in body["sessions"]

        wait_for(listed, "the run's session to exist", proc=run)
        with (
            httpx.Client(base_url=base, headers=AUTH) as client,
            client.stream("GET", "/v1/lanes/live/state", timeout=30) as response,
        ):
            assert response.status_code == 200
            replica = _replica(response.iter_lines())
            value = _until(replica, "the running call", lambda v: "first-line" in _text(v))
            assert _call(value)["status"] == "running"
            assert _call(value)["args"]["command"] == command
            assert value["operation"]["status"] == "running"
            gate1.touch()
            value = _until(replica, "the second line", lambda v: "second-line" in _text(v))
            assert _call(value)["status"] == "running"  # still live, text growing
            gate2.touch()
            value = _until(
                replica,
                "the call to settle",
                lambda v: v["transcript"] and _call(v)["status"] != "running",
            )
        assert _call(value)["status"] == "ok"
        assert _text(value) == "first-line\nsecond-line\nlast-line\n"
        # The settled state is the final one even when the last checkpoint was retired
        # before the server read it: its totals come from the run's record.
        assert _call(value)["output"]["truncation"]["total_lines"] == 3
        (entry,) = value["transcript"]
        assert entry["tool_call_id"] in value["tools"] and entry.get("output_ref")
        run.wait(timeout=60)
        assert run.returncode == 0
        os.kill(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
    finally:
        for p in (run, proc):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
