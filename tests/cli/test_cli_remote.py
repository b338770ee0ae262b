"""``toolfold run --ssh`` against a real loopback sshd: a normal run, Ctrl-C, and a
``kill -9`` of toolfold mid-call followed by ``resume`` (the crash-kill guarantees
with a remote exec env)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
from pathlib import Path

from cli_helpers import LineReader, pending_text, start, toolfold, wait_for

from sshd_fixture import EXEC_HOST, SSHServer, read_pid, wait_gone
from toolfold.harness import CANCELLED_MARKER, INTERRUPTION_MARKER

SLOW = 'echo $$ > {pid}; for i in $(seq 1 100000); do echo "tick $i"; sleep 0.01; done'


def ssh_args(server: SSHServer, tmp_path: Path) -> list[str]:
    return [
        "--ssh",
        server.destination,
        "--ssh-option",
        shlex.join(server.options),
        "--remote-command",
        f"{EXEC_HOST} --spill-dir {tmp_path / 'remote-spill'}",
        "--remote-cwd",
        str(tmp_path),
    ]


def test_run_over_ssh_prints_the_window_and_names_the_remote_spill(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    done = toolfold(
        "run", "--store", store, "--session", "far", *ssh_args(sshd_server, tmp_path),
        "--", "seq 1 100000; pwd", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("98002\n") and f"100000\n{tmp_path}\n" in done.stdout
    found = re.search(r"Full output: (\S+)\]", done.stdout)
    assert found is not None
    spill = Path(found.group(1))
    assert spill.parent == tmp_path / "remote-spill" / "far"
    assert spill.read_bytes().startswith(b"1\n2\n3\n")
    assert f"full output: {spill} (on ssh {sshd_server.destination})" in done.stderr
    # Nothing of it went to the local store's spill directory.
    assert not (tmp_path / "spill").exists()
    failing = toolfold(
        "run", "--store", store, *ssh_args(sshd_server, tmp_path), "--", "exit 7", cwd=tmp_path
    )
    assert failing.returncode == 7


def test_ctrl_c_over_ssh_cancels_and_kills_the_remote_command(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    pid_file = tmp_path / "pid"
    proc = start(
        "run", "--store", store, "--session", "intr", *ssh_args(sshd_server, tmp_path),
        "--", SLOW.format(pid=pid_file), cwd=tmp_path,
    )  # fmt: skip
    out = LineReader(proc.stdout)
    try:
        pid = read_pid(pid_file)
        wait_for(
            lambda: (t := pending_text(store, "intr")) and "tick 3\n" in t, "tick 3", proc=proc
        )
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert wait_gone(pid)
    text = out.text()
    assert "tick 3\n" in text and text.rstrip("\n").endswith(CANCELLED_MARKER)


def test_kill_9_of_toolfold_mid_call_then_resume(sshd_server: SSHServer, tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    pid_file = tmp_path / "pid"
    proc = start(
        "run", "--store", store, "--session", "crash", *ssh_args(sshd_server, tmp_path),
        "--", SLOW.format(pid=pid_file), cwd=tmp_path,
    )  # fmt: skip
    try:
        pid = read_pid(pid_file)
        seen = wait_for(
            lambda: (t := pending_text(store, "crash")) and "tick 5\n" in t and t,
            "a checkpoint with tick 5",
            proc=proc,
        )
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # toolfold dies; its ssh client is orphaned
        proc.wait()
    # The orphaned ssh client's stdin closed with its parent; the exec host saw EOF
    # and killed the command.
    assert wait_gone(pid, 30.0)
    resumed = toolfold("resume", "crash", "--store", store, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "settled from its last checkpoint as interrupted" in resumed.stdout
    message = json.loads(
        toolfold("show", "crash", "1", "--store", store, "--json", cwd=tmp_path).stdout
    )
    assert message["outcome"] == "interrupted"
    final = message["content"][0]["text"]
    assert final.startswith(seen.split("\n", 1)[0]) and final.endswith(INTERRUPTION_MARKER)
    ticks = [line for line in final.splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(1, len(ticks) + 1)] and len(ticks) >= 5


def test_remote_option_errors_are_one_line_and_record_nothing(tmp_path: Path) -> None:
    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    for args, message in (
        (["--ssh", "a@b", "--exec-host", "env"], "--ssh and --exec-host exclude each other"),
        (["--ssh-option", "-p 2"], "need --ssh DEST or --exec-host PREFIX"),
        (["--exec-host", "env", "--ssh-option", "-p 2"], "--ssh-option needs --ssh DEST"),
        (["--ssh", "-oProxyCommand=x"], "SSH destination must be user@host"),
        (
            ["--exec-host", "env", "--remote-command", "toolfold-not-here exec-host"],
            "toolfold exec-host is not installed on env",
        ),
    ):
        done = toolfold("run", "--store", store, *args, "--", "true", cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("toolfold: error: "), done.stderr
        assert message in lines[0], (args, lines[0])
    assert not (tmp_path / "toolfold.db").exists()  # refused before the store was opened


def test_a_detached_run_over_ssh_is_followed_and_stopped(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    done = toolfold(
        "run",
        "--detach",
        *ssh_args(sshd_server, tmp_path),
        "--",
        f"echo $$ > {pid_file}; echo remote-up; sleep 1000",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    remote_pid = read_pid(pid_file)
    attached = start("attach", run_id, cwd=tmp_path)
    out = LineReader(attached.stdout)
    wait_for(lambda: out.has("remote-up"), "its output", proc=attached)
    refused = toolfold("send", run_id, "x", cwd=tmp_path)
    assert refused.returncode == 2
    assert "takes no input: its command runs on another machine" in refused.stderr
    stopped = toolfold("stop", run_id, cwd=tmp_path)
    assert (
        stopped.stdout == f"toolfold: stopped {run_id}; `toolfold show {run_id}` has its output\n"
    )
    assert wait_gone(remote_pid)
    assert attached.wait(timeout=60) == 130
    assert attached.stderr is not None and "toolfold: cancelled" in attached.stderr.read().decode()
    assert out.text().count("remote-up") == 1
