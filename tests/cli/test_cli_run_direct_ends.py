"""How a bare ``toolfold run -- COMMAND`` (the direct driver) ends when it does not end by
itself: Ctrl-C / SIGTERM cancel, a second signal stops waiting, a full disk at the
settlement is one line and leaves the call to ``resume``."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
from pathlib import Path

import pytest
from cli_helpers import TOOLFOLD, LineReader, clean_env, start, toolfold, wait_for

from tmpfs_fixture import small_tmpfs
from toolfold.harness import CANCELLED_MARKER, INTERRUPTION_MARKER

SLOW = 'for i in $(seq 1 100000); do echo "tick $i"; sleep 0.01; done'


def _session(errors: LineReader) -> str | None:
    for line in errors.lines():
        found = re.search(r"in session (\S+),", line)
        if found:
            return found.group(1)
    return None


def _message(tmp_path: Path, session: str) -> dict[str, object]:
    shown = toolfold("show", session, "1", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    message: dict[str, object] = json.loads(shown.stdout)
    return message


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["int", "term"]
)
def test_a_signal_cancels_and_keeps_the_partial_output(
    tmp_path: Path, signum: int, status: int
) -> None:
    proc = start("run", "--", SLOW, cwd=tmp_path)
    errors = LineReader(proc.stderr)
    try:
        wait_for(lambda: _session(errors), "the title line", proc=proc)
        # The output so far reaches the live status (the plain view prints it) only
        # after five seconds; what the store holds shows progress sooner.
        session = _session(errors)
        assert session is not None
        wait_for(
            lambda: "tick 3" in toolfold("show", session, "1", cwd=tmp_path).stdout,
            "progress in a checkpoint",
            proc=proc,
        )
        os.kill(proc.pid, signum)
        out = proc.stdout.read() if proc.stdout is not None else b""
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == status, errors.text()
    text = out.decode()
    assert "tick 1\n" in text and text.rstrip().endswith(CANCELLED_MARKER)
    assert "cancelling the command" in errors.text()
    message = _message(tmp_path, session)
    assert message["outcome"] == "cancelled"
    assert message["content"][0]["text"] == text.removesuffix("\n")  # type: ignore[index]
    again = toolfold("resume", session, cwd=tmp_path)
    assert again.returncode == 0 and "nothing to resume" in again.stdout


def test_a_second_signal_stops_waiting_and_settles_interrupted(tmp_path: Path) -> None:
    # The command ignores SIGTERM (a cooperative cancel would wait out the grace), and
    # says so with a file once the trap is set: a signal sent before that would find a
    # shell that still dies of SIGTERM.
    stubborn = 'trap "" TERM; : > trapped; ' + SLOW
    proc = start("run", "--", stubborn, cwd=tmp_path)
    errors = LineReader(proc.stderr)
    try:
        wait_for(lambda: _session(errors), "the title line", proc=proc)
        wait_for(lambda: (tmp_path / "trapped").exists(), "the TERM trap set", proc=proc)
        os.kill(proc.pid, signal.SIGINT)
        wait_for(lambda: errors.has("cancelling the command"), "the first SIGINT", proc=proc)
        os.kill(proc.pid, signal.SIGINT)
        out = proc.stdout.read() if proc.stdout is not None else b""
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, errors.text()
    assert out.decode().rstrip().endswith(INTERRUPTION_MARKER)
    session = _session(errors)
    assert session is not None
    assert _message(tmp_path, session)["outcome"] == "interrupted"


def test_a_full_disk_at_the_settlement_is_one_line_and_resume_settles(tmp_path: Path) -> None:
    mark = "written-before-the-disk-filled"
    with small_tmpfs(tmp_path / "mnt", size="8m") as mnt:
        (mnt / "store").mkdir()
        url = f"sqlite:{mnt}/store/t.db"
        env = clean_env()
        env["TOOLFOLD_STORE"] = url
        show = " ".join(shlex.quote(a) for a in [*TOOLFOLD, "show"])
        # The command prints its mark, waits (a bounded poll) until a checkpoint holding
        # it is committed, then fills the disk and prints more.
        command = (
            f"echo {mark}; s=$(ls {mnt}/store/spill); "
            f'for i in $(seq 1 100); do {show} "$s" 1 2>/dev/null | grep -q {mark} && break; '
            "done; "
            f"head -c 64M /dev/zero > {mnt}/filler 2>/dev/null; "
            "seq -f 'after the disk filled %g' 1 1500"
        )
        done = toolfold("run", "--", command, cwd=tmp_path, env=env)
        assert done.returncode == 2, done.stderr
        errors = [x for x in done.stderr.splitlines() if x.startswith("toolfold: error:")]
        assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "could not record the end of call" in errors[0]
        assert "the disk is full" in errors[0] and "left unsettled" in errors[0]
        session = next(iter(os.listdir(mnt / "store" / "spill")))
        assert f"toolfold resume {session}`" in errors[0]  # $TOOLFOLD_STORE: no flag
        (mnt / "filler").unlink()
        resumed = toolfold("resume", session, cwd=tmp_path, env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert "settled from its last checkpoint as interrupted" in resumed.stdout
        settled = toolfold("show", session, "1", cwd=tmp_path, env=env)
        assert settled.stdout.startswith(mark) and "interrupted" in settled.stdout


ESCAPES = (
    # A process that leaves the command's process group (setsid), still holding the
    # pipes, notes each SIGTERM it gets and goes on: only SIGKILL stops it.
    'setsid sh -c \'echo $$ > escaped; trap "echo term >> got_term" TERM; '
    "while :; do sleep 0.05; done' & "
    "while [ ! -s escaped ]; do sleep 0.05; done; echo ready; sleep 1000"
)


def _pid_in(file: Path) -> int:
    try:
        return int(file.read_text())
    except (OSError, ValueError):
        return 0


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.parametrize("options", [(), ("--retain", "tail")], ids=["direct", "asyncio"])
def test_a_cancel_sends_sigterm_then_sigkill_to_what_left_the_group_on_both_paths(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """Cancelling runs LocalExecEnv's sequence on both drivers (the same code,
    ``_reaper.terminate_command`` then ``kill_command``): SIGTERM to the group and to the
    processes that left it, SIGKILL to whatever survived the grace; the run ends even
    though the escaped process still holds the output pipes."""
    env = clean_env()
    env["TOOLFOLD_DIRECT_RUN"] = "0" if options else "1"
    proc = start("run", *options, "--", ESCAPES, cwd=tmp_path, env=env)
    errors = LineReader(proc.stderr)
    pid = 0
    try:
        wait_for(lambda: _session(errors), "the title line", proc=proc)
        wait_for(lambda: _pid_in(tmp_path / "escaped"), "the escaped process", proc=proc)
        pid = _pid_in(tmp_path / "escaped")
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=30)  # the output is small: the pipe holds it meanwhile
        out = proc.stdout.read() if proc.stdout is not None else b""
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if pid and _alive(pid):
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 130, errors.text()
    assert out.decode().rstrip().endswith(CANCELLED_MARKER)
    assert (tmp_path / "got_term").read_text() == "term\n"  # SIGTERM first, once
    assert not _alive(pid)  # then SIGKILL
