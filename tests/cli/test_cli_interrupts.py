"""Ctrl-C and ``kill -9`` of ``toolfold run``; ``show`` on unsettled calls; ``resume``."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from cli_helpers import LineReader, pending_text, spill_text, start, toolfold, wait_for

from toolfold.harness import CANCELLED_MARKER, INTERRUPTION_MARKER

# One numbered line every 10 ms: slow enough to interrupt mid-way, fast enough to
# make progress quickly. The loop never finishes on its own within the test.
SLOW = 'for i in $(seq 1 100000); do echo "tick $i"; sleep 0.01; done'


def test_sigint_cancels_keeps_partial_output_and_settles_cancelled(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    proc = start(
        "run",
        "--store",
        store,
        "--session",
        "intr",
        "--max-lines",
        "5",
        "--",
        SLOW,
        cwd=tmp_path,
    )
    try:
        # The spill file shows the command is producing (it spills once past 5 lines).
        wait_for(
            lambda: "tick 20\n" in spill_text(tmp_path / "spill" / "intr"), "tick 20", proc=proc
        )
        # While it runs: `show` prints the recovered pending output and says it runs,
        # and `resume` refuses to settle a call whose process is alive.
        wait_for(lambda: pending_text(store, "intr"), "a durable checkpoint", proc=proc)
        shown = toolfold("show", "intr", "1", "--store", store, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert "still running in process" in shown.stderr
        assert "tick " in shown.stdout
        refused = toolfold("resume", "intr", "--store", store, cwd=tmp_path)
        assert refused.returncode == 2
        assert "is still running in process" in refused.stderr
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    text = out.decode()
    assert "tick " in text
    assert text.rstrip().endswith(CANCELLED_MARKER)
    shown = toolfold("show", "intr", "--store", store, cwd=tmp_path)
    assert shown.returncode == 0
    assert "cancelled" in shown.stdout
    message = json.loads(
        toolfold("show", "intr", "1", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert message["outcome"] == "cancelled"
    assert message["content"][0]["text"] == text.removesuffix("\n")
    # Nothing left to resume: the call settled.
    again = toolfold("resume", "intr", "--store", store, cwd=tmp_path)
    assert again.returncode == 0 and "nothing to resume" in again.stdout


def test_kill_9_then_resume_recovers_the_partial_output(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    proc = start("run", "--store", store, "--session", "crash", "--", SLOW, cwd=tmp_path)
    try:
        # Wait until a durable checkpoint holds some progress, then SIGKILL the whole
        # process group (toolfold and the command), as a crash would.
        seen = wait_for(
            lambda: (t := pending_text(store, "crash")) and "tick 5\n" in t and t,
            "a checkpoint with tick 5",
            proc=proc,
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    # Unsettled: listed as such, and `show CALL` prints the recovered pending output.
    listing = toolfold("show", "crash", "--store", store, cwd=tmp_path)
    assert listing.returncode == 0
    assert "unsettled" in listing.stdout
    pending = toolfold("show", "crash", "1", "--store", store, cwd=tmp_path)
    assert pending.returncode == 0, pending.stderr
    assert "not settled; `toolfold resume crash` settles it" in pending.stderr
    assert pending.stdout.startswith(seen.split("\n", 1)[0])
    assert "tick 5\n" in pending.stdout
    sessions = toolfold("sessions", "--store", store, cwd=tmp_path)
    assert "crash" in sessions.stdout
    # Resume settles it (bash is not replay-safe): the checkpointed output plus the
    # interruption marker, as the model will read it.
    resumed = toolfold("resume", "crash", "--store", store, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "settled from its last checkpoint as interrupted" in resumed.stdout
    assert "resumed 1 call in session crash" in resumed.stdout
    message = json.loads(
        toolfold("show", "crash", "1", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert message["outcome"] == "interrupted" and message["is_error"] is True
    final = message["content"][0]["text"]
    assert final.startswith(pending.stdout.removesuffix("\n"))
    assert final.endswith(INTERRUPTION_MARKER)
    ticks = [line for line in final.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(1, len(ticks) + 1)]
    assert len(ticks) >= 5
    # A second resume has nothing to do.
    again = toolfold("resume", "crash", "--store", store, cwd=tmp_path)
    assert again.returncode == 0 and "nothing to resume" in again.stdout


def test_second_sigint_stops_waiting_and_settles_interrupted(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    # The command ignores SIGTERM, so a cooperative cancel would wait out the kill grace.
    stubborn = 'trap "" TERM; ' + SLOW
    proc = start(
        "run",
        "--store",
        store,
        "--session",
        "twice",
        "--max-lines",
        "5",
        "--",
        stubborn,
        cwd=tmp_path,
    )
    try:
        wait_for(
            lambda: "tick 10\n" in spill_text(tmp_path / "spill" / "twice"), "tick 10", proc=proc
        )
        # Two signals sent back to back can merge into one in the kernel: send the
        # second only once the first was handled (the run says so on stderr).
        errors = LineReader(proc.stderr)
        os.kill(proc.pid, signal.SIGINT)
        wait_for(
            lambda: errors.has("cancelling the command"), "the first SIGINT handled", proc=proc
        )
        os.kill(proc.pid, signal.SIGINT)
        out = proc.stdout.read() if proc.stdout is not None else b""
        proc.wait(timeout=60)
        err = errors.text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err
    assert "tick " in out.decode()
    assert out.decode().rstrip().endswith(INTERRUPTION_MARKER)
    message = json.loads(
        toolfold("show", "twice", "1", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert message["outcome"] == "interrupted"
