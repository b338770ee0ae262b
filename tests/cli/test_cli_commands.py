"""``--help`` everywhere, ``demo`` end to end, ``serve`` answering, the live view on a TTY."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
from pathlib import Path

import click
import httpx
import pytest
from cli_helpers import AUTH, TOOLFOLD, clean_env, serve, toolfold

from toolfold.cli._main import cli

_CTX = click.Context(cli)
# Through the group's own listing: some commands are defined on first use.
COMMANDS = sorted(
    name
    for name in cli.list_commands(_CTX)
    if (command := cli.get_command(_CTX, name)) is not None and not command.hidden
)


def test_the_command_set() -> None:
    assert COMMANDS == [
        "agent",
        "attach",
        "demo",
        "exec-host",
        "mcp",
        "ps",
        "resume",
        "run",
        "send",
        "serve",
        "sessions",
        "show",
        "stop",
    ]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help(tmp_path: Path, command: str | None) -> None:
    args = ["--help"] if command is None else [command, "--help"]
    proc = toolfold(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: toolfold")
    if command is None:
        for name in COMMANDS:
            assert f"  {name} " in proc.stdout
    else:
        assert f"Usage: toolfold {command}" in proc.stdout
        assert "--help" in proc.stdout
    assert list(tmp_path.iterdir()) == []  # help touches no store


def test_demo_exits_zero_and_shows_every_step(tmp_path: Path) -> None:
    home = tmp_path / "demo"
    proc = toolfold("demo", "--dir", str(home), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "Traceback" not in proc.stderr
    assert "the spill file holds all 3,002 lines" in out
    assert "build finished: 3000 objects" in out
    # Live details: several distinct states were printed while pytest ran (how many
    # depends on pacing), the last one complete.
    details = [line for line in out.splitlines() if line.startswith("  details: ")]
    assert len(details) >= 3, details
    assert details[-1] == "  details: total=6 passed=5 failed=1"
    assert "5 passed, 1 failed (test_step[5])" in out
    assert "(this step fails on purpose: it shows what a failure looks like)" in out
    assert "exit status 2 (the command's own, as intended)" in out
    assert "main.c:42: error" in out
    assert "child killed with SIGKILL" in out
    assert "re-ran seeded from its last memo -> ok" in out
    assert "nothing lost, nothing duplicated: each of the 8 steps appears once" in out
    assert f" sessions --store sqlite:{home / 'toolfold.db'}" in out
    listed = toolfold("sessions", "--store", f"sqlite:{home / 'toolfold.db'}", cwd=tmp_path)
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert names == ["demo", "demo-crash"]


def test_serve_answers_and_stops_on_sigint(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'toolfold.db'}"
    made = toolfold("run", "--store", url, "--session", "seen", "--", "echo hi", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    proc, base = serve(url, tmp_path)
    try:
        assert httpx.get(f"{base}/v1/sessions", headers=AUTH, timeout=5).json() == {
            "sessions": ["seen"]
        }
        page = httpx.get(f"{base}/", headers=AUTH, timeout=5)
        assert page.status_code == 200 and "<html" in page.text.lower()
        os.kill(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err
    assert f"serving {base}/?token=" in err.decode()


def test_live_view_on_a_terminal(tmp_path: Path) -> None:
    master, slave = pty.openpty()
    env = clean_env()
    env["COLUMNS"], env["LINES"], env["TERM"] = "120", "30", "xterm"
    proc = subprocess.Popen(
        [
            *TOOLFOLD,
            "run",
            "--max-lines",
            "4",
            "--",
            "for i in $(seq 1 40); do echo row $i; sleep 0.02; done",
        ],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other side closed
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0
    screen = b"".join(chunks).decode(errors="replace")
    # Frames of the live view: the status line with totals, window and rate.
    assert "lines /" in screen and "so far" in screen and "updates/s" in screen
    assert "spill: " in screen
    # Then the model-visible result.
    assert "row 40" in screen and "Showing lines 37-40 of 40" in screen
