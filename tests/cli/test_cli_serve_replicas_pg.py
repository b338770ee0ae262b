"""Two ``toolfold serve`` replicas on one PostgreSQL, no load balancer (two ports): a
``toolfold run --session S`` in a third process shows up live in BOTH, and an SSE client
that leaves replica 1 mid-call and reconnects to replica 2 gets a base first and ends
with the same view as a client that stayed on replica 1.

Only convergence is asserted (every wait is a bounded read of the streams), never how
fast a replica follows: latency is measured in benchmarks/bench_pg_hosts.py."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from cli_helpers import (
    AUTH,
    LineReader,
    lane_call,
    lane_text,
    serve,
    sse_values,
    start,
    until,
    wait_for,
)

from toolfold.chord import is_base


def settled(value: Any) -> bool:
    call = lane_call(value)
    return bool(value and value["transcript"] and call and call["status"] != "running")


def settled_view(value: Any) -> Any:
    """The settled call as a viewer sees it, without the output's truncation totals.

    Those come from the call's last checkpoint, which the settlement's commit retires:
    a follower that reads the store only after the settlement never sees them, so two
    replicas can differ there (a gap of the follower, not of where a client connects)."""
    call = copy.deepcopy(lane_call(value))
    call["output"].pop("truncation", None)
    return call


def test_a_run_shows_live_in_two_replicas_and_a_client_can_move_between_them(
    postgres_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    gate1, gate2 = tmp_path / "gate1", tmp_path / "gate2"
    command = (
        f"echo first-line; while [ ! -e {gate1} ]; do sleep 0.05; done; "
        f"echo second-line; while [ ! -e {gate2} ]; do sleep 0.05; done; echo last-line"
    )
    try:
        one, base1 = serve(postgres_url, tmp_path)
        procs.append(one)
        two, base2 = serve(postgres_url, tmp_path)
        procs.append(two)
        # Each replica guards itself: no token, no entry; a foreign page, no entry.
        assert httpx.get(f"{base2}/v1/sessions", timeout=5).status_code == 401
        foreign = {**AUTH, "Origin": "http://evil.example"}
        assert httpx.get(f"{base2}/v1/sessions", headers=foreign, timeout=5).status_code == 403
        run = start("run", "--store", postgres_url, "--session", "S", "--", command, cwd=tmp_path)
        procs.append(run)
        run_out = LineReader(run.stdout)

        for base in (base1, base2):

            def listed(base: str = base) -> bool:
                body = httpx.get(f"{base}/v1/sessions", headers=AUTH, timeout=5).json()
                return "S" in body["sessions"]

            wait_for(listed, f"session S in {base}", proc=run)

        with (
            httpx.Client(base_url=base1, headers=AUTH) as c1,
            httpx.Client(base_url=base2, headers=AUTH) as c2,
            c1.stream("GET", "/v1/lanes/S/state", timeout=60) as stay1,
            c2.stream("GET", "/v1/lanes/S/state", timeout=60) as stay2,
        ):
            assert stay1.status_code == 200 and stay2.status_code == 200
            on1, on2 = sse_values(stay1.iter_lines()), sse_values(stay2.iter_lines())
            # The client that will move, on replica 1 for now.
            with c1.stream("GET", "/v1/lanes/S/state", timeout=60) as leaving:
                mover = sse_values(leaving.iter_lines())
                for stream in (on1, on2, mover):
                    value = until(stream, "the first line", lambda v: "first-line" in lane_text(v))
                    assert lane_call(value)["status"] == "running"
            # It disconnected mid-call; the call goes on.
            gate1.touch()
            for stream in (on1, on2):
                value = until(stream, "the second line", lambda v: "second-line" in lane_text(v))
                assert lane_call(value)["status"] == "running"  # both live, text growing
            with c2.stream("GET", "/v1/lanes/S/state", timeout=60) as arriving:
                lines = arriving.iter_lines()
                first = _first_batch(lines)
                assert is_base(first)  # a replace of the whole view, the call's state in it
                assert "first-line\\nsecond-line" in json.dumps(first)  # what replica 2 shows now
                moved = sse_values(_replay(first, lines))
                value = until(moved, "the second line", lambda v: "second-line" in lane_text(v))
                gate2.touch()
                final_moved = until(moved, "the call to settle", settled)
            final_stayed = until(on1, "the call to settle", settled)
            final_two = until(on2, "the call to settle", settled)

        assert lane_text(final_stayed) == "first-line\nsecond-line\nlast-line\n"
        assert lane_call(final_stayed)["status"] == "ok"
        # Converged: the client that moved sees what the one that stayed sees.
        assert settled_view(final_moved) == settled_view(final_stayed) == settled_view(final_two)
        assert final_moved["transcript"] == final_stayed["transcript"] == final_two["transcript"]
        run.wait(timeout=60)
        assert run.returncode == 0 and "last-line" in run_out.text()
        for replica in (one, two):
            os.kill(replica.pid, signal.SIGINT)
            _out, err = replica.communicate(timeout=30)
            assert replica.returncode == 0, err
    finally:
        gate1.touch()
        gate2.touch()


def _first_batch(lines: Iterator[str]) -> Any:
    """The wire JSON of a stream's first batch (comments and the id line skipped)."""
    for _, line in zip(range(1000), lines, strict=False):
        if line.startswith("data: "):
            return json.loads(line[6:])
    raise AssertionError("the stream sent no batch")


def _replay(first: Any, lines: Iterator[str]) -> Iterator[str]:
    """The stream's lines again, starting with the already read first batch."""
    yield "id: 0"
    yield "data: " + json.dumps(first)
    yield from lines


def test_a_replica_killed_mid_command_has_it_settled_by_another(
    postgres_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    gate = tmp_path / "gate"
    # The command runs in its own process group: it outlives the killed replica and
    # ends once the gate file appears (written at the end, whatever happened).
    command = f"echo started; while [ ! -e {gate} ]; do sleep 0.05; done; echo after-gate"
    try:
        one, base1 = serve(postgres_url, tmp_path)
        procs.append(one)
        two, base2 = serve(postgres_url, tmp_path, "--resume-orphans", "--lease", "1")
        procs.append(two)
        errors = LineReader(two.stderr)
        r = httpx.post(
            f"{base1}/v1/lanes/build/commands", json={"command": command}, headers=AUTH, timeout=5
        )
        assert r.status_code == 202, r.text
        call_id = r.json()["tool_call_id"]

        def first_call() -> Any:
            r = httpx.get(f"{base2}/v1/sessions/build/calls", headers=AUTH, timeout=5)
            found = r.json().get("calls") if r.status_code == 200 else None
            return found[0] if found else None

        def checkpointed() -> Any:
            call = first_call()
            state = call.get("state") if call else None
            return call if state and "started" in state["content"][0]["text"] else None

        # Replica two reads the command's checkpoints from the store.
        pending = wait_for(checkpointed, "the command's first checkpoint", proc=two)
        assert pending["tool_call_id"] == call_id and not pending["settled"]
        os.killpg(one.pid, signal.SIGKILL)  # replica one dies mid-command
        one.wait(timeout=30)
        call = wait_for(
            lambda: (c := first_call()) and c["settled"] and c, "replica two to settle it", proc=two
        )
        assert call["tool_call_id"] == call_id and call["status"] == "interrupted"
        text = call["message"]["content"][0]["text"]
        assert text.startswith("started\n") and "after-gate" not in text
        wait_for(lambda: errors.has(f"settled call {call_id} of session build"), "the report")
        os.kill(two.pid, signal.SIGINT)
        two.wait(timeout=30)
        assert two.returncode == 0, errors.text()
    finally:
        gate.write_text("go")
