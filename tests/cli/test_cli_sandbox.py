"""--sandbox on the CLI: run confines only when asked, mcp / agent / exec-host refuse to
start (one line naming the package) when they cannot confine, and an exec host started
by `run --exec-host --sandbox` confines its commands and says so in its hello."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from cli_helpers import TOOLFOLD, clean_env, toolfold

from sshd_fixture import EXEC_HOST

NO_BWRAP = (
    "toolfold: error: cannot confine commands: 'bwrap' (bubblewrap) is not installed; install "
    "the package bubblewrap (apt-get install bubblewrap); or run them unconfined explicitly "
    "(--sandbox off, or sandbox=None)\n"
)


def test_run_is_unconfined_by_default_and_confined_when_asked(host_dir: Path) -> None:
    ws = host_dir / "ws"
    ws.mkdir()
    (host_dir / "store").mkdir()
    store = f"sqlite:{host_dir / 'store' / 'toolfold.db'}"
    command = f"echo a > {host_dir}/outside; echo b > inside; echo done"
    plain = toolfold("run", "--store", store, "--", command, cwd=ws)
    assert plain.returncode == 0, plain.stderr
    assert (host_dir / "outside").read_text() == "a\n"
    (host_dir / "outside").unlink()
    boxed = toolfold("run", "--store", store, "--sandbox", "workspace-write", "--", command, cwd=ws)
    assert boxed.returncode == 0, boxed.stderr
    assert f"{host_dir}/outside: Read-only file system" in boxed.stdout
    assert not (host_dir / "outside").exists() and (ws / "inside").read_text() == "b\n"
    # The store cannot be read by the command, though it is next to the workspace.
    peek = toolfold(
        "run", "--store", store, "--sandbox", "read-only", "--",
        f"head -c 15 {host_dir}/store/toolfold.db; ls -A {host_dir}/store/spill", cwd=ws,
    )  # fmt: skip
    assert "toolfold.db' for reading: Permission denied" in peek.stdout, peek.stdout
    assert "SQLite format" not in peek.stdout and "run-" not in peek.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["mcp", "--store", "sqlite:s.db"],
        ["agent", "a task", "--model", "m", "--store", "sqlite:s.db"],
        ["run", "--sandbox", "read-only", "--store", "sqlite:s.db", "--", "true"],
        ["exec-host", "--sandbox", "workspace-write"],
        ["mcp", "proxy", "--store", "sqlite:s.db", "--with-builtin", "--", "true"],
    ],
    ids=["mcp", "agent", "run", "exec-host", "mcp-proxy-with-builtin"],
)
def test_no_bwrap_is_one_line_naming_the_package(tmp_path: Path, args: list[str]) -> None:
    env = clean_env() | {"PATH": str(tmp_path / "empty")}  # no bwrap on it
    done = toolfold(*args, cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert done.stderr == NO_BWRAP
    assert not (tmp_path / "s.db").exists()  # refused before anything was recorded


def test_sandbox_off_runs_without_bwrap(tmp_path: Path) -> None:
    env = clean_env() | {"PATH": str(tmp_path / "empty")}
    done = toolfold(
        "run", "--store", "sqlite:s.db", "--sandbox", "off", "--", "/bin/echo hi",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--sandbox", "read-only", "--sandbox-write", "."],
            "--sandbox-write needs --sandbox workspace-write, not --sandbox read-only",
        ),
        (
            ["--sandbox", "workspace-write", "--sandbox-write", "missing"],
            "--sandbox-write 'missing' is not a directory; create it first",
        ),
        (["--sandbox-network"], "--sandbox-network needs a sandbox"),
    ],
)
def test_option_mistakes_are_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    done = toolfold(
        "run", "--store", f"sqlite:{tmp_path / 's.db'}", *args, "--", "true", cwd=tmp_path
    )
    assert done.returncode == 2
    assert done.stderr.startswith(f"toolfold: error: {message}") and done.stderr.count("\n") == 1


def test_exec_host_says_its_profile_in_the_hello(tmp_path: Path) -> None:
    done = subprocess.run(
        [*TOOLFOLD, "exec-host", "--sandbox", "read-only", "--spill-dir", str(tmp_path / "sp")],
        input=b"", capture_output=True, timeout=60, env=clean_env(), cwd=tmp_path,
    )  # fmt: skip
    hello = json.loads(done.stdout.splitlines()[0])
    assert hello["op"] == "hello" and hello["sandbox"] == "read-only"


def test_run_through_an_exec_host_confines_there(host_dir: Path) -> None:
    ws = host_dir / "ws"
    ws.mkdir()
    (host_dir / "store").mkdir()
    done = toolfold(
        "run", "--store", f"sqlite:{host_dir / 'store' / 't.db'}", "--exec-host", "env",
        "--remote-command", f"{EXEC_HOST} --spill-dir {host_dir / 'remote-spill'}",
        "--remote-cwd", str(ws), "--sandbox", "workspace-write", "--",
        f"echo a > {host_dir}/outside; echo b > inside; echo done", cwd=ws,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"{host_dir}/outside: Read-only file system" in done.stdout
    assert not (host_dir / "outside").exists() and (ws / "inside").read_text() == "b\n"


def test_a_proxy_without_builtin_tools_runs_no_command_and_needs_no_bwrap(tmp_path: Path) -> None:
    # Its upstream (here `true`, which exits at once) runs unconfined: no sandbox is
    # built, so a missing bwrap is no error; the upstream's failure is the one reported.
    env = clean_env() | {"PATH": str(tmp_path / "empty")}
    done = toolfold(
        "mcp", "proxy", "--store", "sqlite:s.db", "--", "/bin/true", cwd=tmp_path, env=env
    )
    assert "cannot confine" not in done.stderr


def test_a_store_file_in_the_workspace_is_hidden_not_the_workspace(host_dir: Path) -> None:
    ws = host_dir / "ws"
    ws.mkdir()
    first = toolfold("run", "--store", "sqlite:t.db", "--", "echo first", cwd=ws)
    assert first.returncode == 0, first.stderr
    store = (ws / "t.db").read_bytes()
    done = toolfold(
        "run", "--store", "sqlite:t.db", "--sandbox", "workspace-write", "--",
        "echo made > made; wc -c < t.db; ls spill 2>&1 | head -1; rm -f t.db; echo rm=$?",
        cwd=ws,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].endswith("t.db: Permission denied")  # the store cannot be opened inside
    assert "exec-" not in done.stdout  # the spill directory lists as empty inside
    assert "rm: cannot remove 't.db'" in done.stdout and "rm=1" in done.stdout, done.stdout
    assert (ws / "made").read_text() == "made\n"
    assert (ws / "t.db").read_bytes()[:16] == store[:16] == b"SQLite format 3\x00"
