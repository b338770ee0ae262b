"""``toolfold run --detach`` with ``ps``, ``attach``, ``send`` and ``stop``, through the
real CLI and real processes: a detached command that prints and waits for input is
listed, answered, followed, detached from and stopped, and nothing of it is left
running (checked by its process group); the control files refuse a planted link and
another user's FIFO; input is capped."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_helpers import TOOLFOLD, clean_env, toolfold, wait_for

from toolfold.execenv import kill_marked

NOBODY = 65534
BOUND = 60.0
SCRIPT = (
    "sleep 1000 & echo pid $$; "  # a second process in the command's group, first
    'read -r line; echo "got: $line"; read -r more; echo "more: $more"; wait'
)


@pytest.fixture(autouse=True)
def _kill_what_a_failed_test_left(tmp_path: Path) -> Iterator[None]:
    # Only a failing test leaves a run behind; it must not outlive the test either.
    yield
    root = tmp_path / ".toolfold" / "detached"
    for record in root.glob("*/run.json") if root.is_dir() else ():
        with contextlib.suppress(OSError, ValueError):
            mark = json.loads(record.read_text()).get("mark")
            if isinstance(mark, str) and len(mark) >= 16:
                kill_marked(mark, "TOOLFOLD_DETACHED")


def live_in_group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != b"Z":
                found.append(int(name))
    return found


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except OSError:
        return False


def detach(tmp_path: Path, *args: str) -> str:
    done = toolfold("run", "--detach", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.strip()
    assert run_id.startswith("run-") or "--session" in args
    assert f"`toolfold attach {run_id}` follows its output" in done.stderr
    return run_id


def control(tmp_path: Path, run_id: str) -> Path:
    return tmp_path / ".toolfold" / "detached" / run_id


class Attached:
    """A ``toolfold attach`` whose stdout is read as it comes (bounded waits)."""

    def __init__(self, tmp_path: Path, run_id: str) -> None:
        self.proc = subprocess.Popen(
            [*TOOLFOLD, "attach", run_id],
            cwd=tmp_path,
            env=clean_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
        )
        self.out = b""

    def until(self, text: str) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + BOUND
        while text.encode() not in self.out:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} in {self.out!r}"
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                assert chunk, f"attach ended before {text!r}: {self.out!r}"
                self.out += chunk
        return self.out.decode()

    def finish(self) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=BOUND)
        self.out += out
        return self.proc.returncode, self.out.decode(), err.decode()


def test_detach_list_send_attach_detach_and_stop(tmp_path: Path) -> None:
    run_id = detach(tmp_path, "--", SCRIPT)
    listed = toolfold("ps", cwd=tmp_path)
    assert listed.returncode == 0
    [header, row] = listed.stdout.splitlines()
    assert header.split() == ["id", "pid", "state", "started", "command"]
    assert row.split()[0] == run_id and row.split()[2] == "running"
    assert "echo pid $$" in row

    attached = Attached(tmp_path, run_id)
    pgid = int(attached.until("pid ").split("pid ")[1].split()[0])
    assert len(live_in_group(pgid)) == 2  # the shell and its sleep
    sent = toolfold("send", run_id, "yes", "please", cwd=tmp_path)
    assert sent.returncode == 0 and sent.stderr == f"toolfold: sent 11 bytes to {run_id}\n"
    assert "got: yes please\n" in attached.until("got: yes please\n")
    # Ctrl-C detaches: attach ends, the run goes on.
    attached.proc.send_signal(signal.SIGINT)
    code, out, err = attached.finish()
    assert code == 0, err
    assert err.endswith(
        f"toolfold: detached from {run_id}; it keeps running (`toolfold stop {run_id}` stops it)\n"
    )
    assert out.count("got: yes please") == 1  # no line printed twice
    assert len(live_in_group(pgid)) == 2

    stopped = toolfold("stop", run_id, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert (
        stopped.stdout == f"toolfold: stopped {run_id}; `toolfold show {run_id}` has its output\n"
    )
    assert wait_for(lambda: not live_in_group(pgid), f"group {pgid} to be gone")
    assert toolfold("ps", cwd=tmp_path).stdout == (
        f"no detached runs in {tmp_path}/.toolfold/detached\n"
    )
    assert not control(tmp_path, run_id).exists()
    shown = toolfold("show", run_id, "1", cwd=tmp_path)
    assert "settled, cancelled" in shown.stderr
    assert "got: yes please\n" in shown.stdout
    gone = toolfold("send", run_id, "late", cwd=tmp_path)
    assert gone.returncode == 2 and f"no detached run {run_id!r}" in gone.stderr


def test_attach_follows_to_the_end_and_exits_with_the_commands_status(tmp_path: Path) -> None:
    run_id = detach(
        tmp_path,
        "--max-lines",
        "5",
        "--",
        "echo ready; read -r n; seq 1 $n; read -r more; echo last-$more; exit 3",
    )
    attached = Attached(tmp_path, run_id)
    attached.until("ready\n")
    assert toolfold("send", run_id, "3", cwd=tmp_path).returncode == 0
    attached.until("3\n")
    # The last line and the end of input go in one send.
    assert toolfold("send", run_id, "x", "--eof", cwd=tmp_path).returncode == 0
    code, out, err = attached.finish()
    assert code == 3, err
    assert out == "ready\n1\n2\n3\nlast-x\n"
    assert "toolfold: error, exit code 3" in err


def test_send_eof_ends_the_commands_input(tmp_path: Path) -> None:
    run_id = detach(tmp_path, "--", "cat; echo eof-seen")
    attached = Attached(tmp_path, run_id)
    sent = toolfold("send", run_id, "line one", "--eof", cwd=tmp_path)
    assert sent.stderr.endswith("and closed its input\n")
    code, out, err = attached.finish()
    assert (code, out) == (0, "line one\neof-seen\n"), err


def test_stop_kills_a_run_that_does_not_wind_down_and_resume_settles_it(tmp_path: Path) -> None:
    # It ignores SIGTERM, so the worker's own teardown would wait its kill grace (2 s).
    run_id = detach(tmp_path, "--lease", "0.5", "--", "trap '' TERM; echo pid $$; sleep 1000")
    attached = Attached(tmp_path, run_id)
    pgid = int(attached.until("pid ").split("pid ")[1].split()[0])
    info = json.loads((control(tmp_path, run_id) / "run.json").read_text())
    stopped = toolfold("stop", run_id, "--time", "0", cwd=tmp_path)
    assert stopped.returncode == 0
    assert f"toolfold: {run_id} did not end by itself: killed " in stopped.stdout
    assert f"`toolfold resume {run_id}` settles it" in stopped.stdout
    assert wait_for(lambda: not live_in_group(pgid), f"group {pgid} to be gone")
    assert wait_for(lambda: not alive(info["pid"]), "the worker to be gone")
    code, _out, err = attached.finish()
    assert code == 2 and "ended before its call settled" in err
    # Once the dead worker's lease (0.5 s) has run out.
    wait_for(
        lambda: (
            "settled from its last checkpoint as interrupted"
            in toolfold("resume", run_id, cwd=tmp_path).stdout
        ),
        "resume to settle the call",
    )


def test_input_is_capped(tmp_path: Path) -> None:
    run_id = detach(tmp_path, "--", "read -r x; echo $x")
    big = subprocess.run(
        [*TOOLFOLD, "send", run_id],
        input=b"x" * (64 * 1024 + 1),
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        timeout=BOUND,
    )
    assert big.returncode == 2
    assert big.stderr.decode() == (
        "toolfold: error: 65,537 bytes to send; one send writes at most 65,536 bytes — "
        "write a file and have the command read it instead\n"
    )
    assert toolfold("send", run_id, "ok", cwd=tmp_path).returncode == 0
    code, out, _ = Attached(tmp_path, run_id).finish()
    assert (code, out) == (0, "ok\n")


def test_memory_store_and_a_running_session_are_refused(tmp_path: Path) -> None:
    done = toolfold("run", "--detach", "--store", "memory:", "--", "true", cwd=tmp_path)
    assert done.returncode == 2
    assert "--detach needs a store that outlives this process" in done.stderr
    run_id = detach(tmp_path, "--session", "dev", "--", "sleep 1000")
    again = toolfold("run", "--detach", "--session", "dev", "--", "true", cwd=tmp_path)
    assert again.returncode == 2
    assert "a detached run of session 'dev' is already running" in again.stderr
    assert toolfold("stop", run_id, cwd=tmp_path).returncode == 0


def test_a_planted_link_as_the_control_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / ".toolfold" / "detached"
    root.mkdir(parents=True, mode=0o700)
    (root / "dev").symlink_to(elsewhere)
    done = toolfold("run", "--detach", "--session", "dev", "--", "touch ran", cwd=tmp_path)
    assert done.returncode == 2
    assert f"refusing {root}/dev: it is a symbolic link" in done.stderr
    assert list(elsewhere.iterdir()) == [] and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("attack", ["link", "theirs"])
def test_send_refuses_a_planted_stdin(tmp_path: Path, attack: str) -> None:
    run_id = detach(tmp_path, "--", "read -r x; echo got $x")
    fifo = control(tmp_path, run_id) / "stdin"
    fifo.unlink()
    target = tmp_path / "target"
    if attack == "link":
        target.write_bytes(b"")
        fifo.symlink_to(target)
        why = "it is a symbolic link"
    else:
        os.mkfifo(fifo, 0o600)
        os.chown(fifo, NOBODY, NOBODY)
        why = f"it is owned by uid {NOBODY}, not you"
    sent = toolfold("send", run_id, "secret", cwd=tmp_path)
    assert sent.returncode == 2
    assert sent.stderr.startswith(f"toolfold: error: refusing {fifo}: {why}")
    if attack == "link":
        assert target.read_bytes() == b""
    assert toolfold("stop", run_id, cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("retain", ["tail", "head_tail"])
def test_attach_says_which_lines_went_past_the_window(tmp_path: Path, retain: str) -> None:
    run_id = detach(
        tmp_path,
        "--retain",
        retain,
        "--max-lines",
        "5",
        "--",
        "echo ready; read -r n; seq 1 $n; read -r m; echo end-$m",
    )
    attached = Attached(tmp_path, run_id)
    attached.until("ready\n")
    assert toolfold("send", run_id, "30", cwd=tmp_path).returncode == 0
    attached.until("30\n")
    assert toolfold("send", run_id, "x", cwd=tmp_path).returncode == 0
    code, out, err = attached.finish()
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(set(lines))  # nothing printed twice
    assert out.startswith("ready\n") and out.endswith("29\n30\nend-x\n")
    spill = next((tmp_path / ".toolfold" / "spill" / run_id).glob("exec-*.log"))
    skipped = 31 - (len(lines) - 1)  # "ready" and 1..30 were written before "end-x"
    assert (
        f"[... {skipped} lines went past the window between two reads: the full output is in {spill}]"
        in err
    )
    if retain == "tail":
        assert out == "ready\n26\n27\n28\n29\n30\nend-x\n"


def test_a_killed_run_is_listed_dead_and_stop_kills_what_it_left(tmp_path: Path) -> None:
    run_id = detach(tmp_path, "--lease", "0.5", "--", "sleep 1000 & echo pid $$; wait")
    attached = Attached(tmp_path, run_id)
    pgid = int(attached.until("pid ").split("pid ")[1].split()[0])
    info = json.loads((control(tmp_path, run_id) / "run.json").read_text())
    os.kill(info["pid"], signal.SIGKILL)  # the detached run's own process, not its command
    wait_for(lambda: not alive(info["pid"]), "the worker to be gone")
    assert len(live_in_group(pgid)) == 2  # its command lives on, as after any kill -9
    listed = toolfold("ps", cwd=tmp_path)
    assert listed.stdout.splitlines()[1].split()[:3] == [run_id, str(info["pid"]), "dead"]
    assert "`toolfold stop ID` stops what it left" in listed.stderr
    stopped = toolfold("stop", run_id, cwd=tmp_path)
    assert stopped.stdout.startswith(
        f"toolfold: {run_id} did not end by itself: killed 2 processes"
    )
    assert wait_for(lambda: not live_in_group(pgid), f"group {pgid} to be gone")
    assert not control(tmp_path, run_id).exists()
    code, _out, err = attached.finish()
    assert code == 2 and "ended before its call settled" in err
    wait_for(
        lambda: (
            "settled from its last checkpoint as interrupted"
            in toolfold("resume", run_id, cwd=tmp_path).stdout
        ),
        "resume to settle the call",
    )


def test_a_detached_run_in_the_sandbox_takes_input_and_cannot_see_its_control_files(
    host_dir: Path,
) -> None:
    run_id = detach(
        host_dir,
        "--sandbox",
        "workspace-write",
        "--",
        "read -r x; echo got $x; touch made-here; "
        "cat .toolfold/detached/*/run.json || echo no-control-files; "
        "touch /usr/nope 2>/dev/null || echo usr-refused",
    )
    assert toolfold("send", run_id, "hi", cwd=host_dir).returncode == 0
    code, out, err = Attached(host_dir, run_id).finish()
    assert code == 0, err
    assert out.splitlines()[0] == "got hi"
    assert "no-control-files" in out and "usr-refused" in out and '"mark"' not in out
    assert (host_dir / "made-here").exists()
