"""What ``toolfold run`` imports: none of the heavy optional layers (the web server, the
terminal UI, other storage backends, MCP, pydantic). An assertion about behaviour (the
modules a process loads), not timing; the time is in benchmarks/bench_startup.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import clean_env

NOT_FOR_RUN = (
    "starlette",
    "uvicorn",
    "rich",
    "psycopg",
    "pydantic",
    "pydantic_core",
    "mcp",
    "httpx",
    "anyio",
    "opentelemetry",
)
"""Packages ``toolfold run -- true`` on the default SQLite store must not import."""

NOT_FOR_A_LOCAL_RUN = (
    # the other layers
    "toolfold.server",
    "toolfold.mcp",
    "toolfold.agent",
    "toolfold.integrations",
    "toolfold.cli._main_mcp",
    "toolfold.cli._mcp",
    "toolfold.history._follow",
    # a session's calls as stored (a run writes its records, it reads none)
    "toolfold.history._calls",
    # the model loop and an assistant message's output
    "toolfold.harness._loop",
    "toolfold.harness._lane",
    "toolfold.harness._assistant",
    "toolfold.output._assistant",
    # the output of a command that outlived its call (a foreground run's never does)
    "toolfold.harness._background_call",
    # an assistant message's events (a run of tool calls emits none)
    "toolfold.harness._message_events",
    # the other stores
    "toolfold.storage._memory",
    "toolfold.storage._jsonl",
    "toolfold.storage._postgres",
    # the remote side of the exec env
    "toolfold.execenv._remote",
    "toolfold.execenv._exec_host",
    "toolfold.execenv._protocol",
    "toolfold.execenv._fileops",
    # how --ssh / --exec-host reach the other side
    "toolfold.execenv._transport",
    "toolfold.cli._run_remote",
    # the sandbox (a run without --sandbox is not confined)
    "toolfold.execenv._sandbox",
    # what kills a detached run's marked processes (`toolfold stop`)
    "toolfold.execenv._hostguard",
    # commands that go on in the background (a foreground run starts none), terminals
    "toolfold.execenv._background",
    "toolfold.execenv._pty",
    "termios",
    # the exec span (only with a tracer configured)
    "toolfold.execenv._tracing",
    # recovery after a crash, an assistant message's durable stream
    "toolfold.durability._recovery",
    "toolfold.durability._messages",
    # what a store's reads hand back (a run commits, it reads no list or entry)
    "toolfold.storage._entries",
    # a lease as read back (a takeover, a fenced write's error)
    "toolfold.durability._lease_info",
    # an operation left pending, as found (resume, a janitor)
    "toolfold.durability._pending",
    # standard-library modules none of that needs: package metadata (entry points,
    # plugin discovery), ctypes.util (runs ldconfig), shutil (with its compression
    # modules), tempfile, HTTP, e-mail, archives
    "importlib.metadata",
    "shutil",
    "ctypes.util",
    "tempfile",
    "http",
    "urllib.request",
    "email",
    "zipfile",
    "tarfile",
    "multiprocessing",
    "argparse",
)
"""Modules (and their submodules) a local ``toolfold run`` must not import: it imports
what its path needs when it needs it. Not listed, because asyncio imports them itself:
``ssl``, ``logging``, ``inspect``, ``concurrent.futures``."""

NOT_FOR_A_BARE_RUN = ("click", "toolfold.cli._main", "toolfold.cli._shared")
"""What ``toolfold run -- COMMAND`` (no option) does without: it is parsed without click
and the command group (``cli/_entry.py``)."""

_IMPORT = re.compile(r"import time:\s+\d+ \|\s+\d+ \| \s*(\S+)")

_SCRIPT = Path(sys.executable).with_name("toolfold")

ENTRY_POINTS = {
    # what `python -m toolfold.cli` runs
    "module": ["-m", "toolfold.cli"],
    # the installed `toolfold` console script; where there is none, what its generated
    # wrapper does (import toolfold.cli, call main())
    "script": [str(_SCRIPT)]
    if _SCRIPT.is_file()
    else ["-c", "import sys; from toolfold.cli import main; sys.argv[0] = 'toolfold'; main()"],
}


def imported_by(args: list[str], cwd: Path) -> set[str]:
    """Every module a fresh ``python -X importtime ARGS`` process imported."""
    env = clean_env()
    env["HOME"] = str(cwd)  # the default store (~/.toolfold) lands in the test's directory
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = {m.group(1) for m in map(_IMPORT.match, proc.stderr.splitlines()) if m}
    assert "toolfold.cli" in modules or "toolfold" in modules, proc.stderr[-2000:]
    return modules


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in NOT_FOR_RUN)


def unneeded(modules: set[str]) -> list[str]:
    return sorted(
        m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_FOR_A_LOCAL_RUN)
    )


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_run_on_the_default_store_imports_no_heavy_layer(tmp_path: Path, entry: str) -> None:
    modules = imported_by([*ENTRY_POINTS[entry], "run", "--", "echo", "hi"], tmp_path)
    assert "sqlite3" in modules  # it did open the default store
    assert (tmp_path / ".toolfold").is_dir()
    assert heavy(modules) == []
    # nor the other built-in tools, whose params are pydantic models
    assert (
        not {"toolfold.tools.read", "toolfold.tools.grep", "toolfold.tools.pytest_tool"} & modules
    )
    assert unneeded(modules) == []
    assert sorted(m for m in modules if m.split(".")[0] == "click" or m in NOT_FOR_A_BARE_RUN) == []


def test_run_with_options_imports_only_its_path(tmp_path: Path) -> None:
    """The options of a local run (a window, a session, JSON output) add nothing."""
    args = ["-m", "toolfold.cli", "run", "--session", "s1", "--retain", "head_tail"]
    modules = imported_by([*args, "--max-bytes", "4K", "--json", "--", "echo", "hi"], tmp_path)
    assert "toolfold.storage._sqlite" in modules
    assert heavy(modules) == []
    assert unneeded(modules) == []
    assert "click" in modules  # an option before `--`: click parses the command line


def test_other_commands_still_reach_what_run_leaves_out(tmp_path: Path) -> None:
    """``mcp --help`` defines the lazily registered ``mcp`` group (so the check above is
    about ``run``'s path, not about a command that went missing)."""
    modules = imported_by(["-m", "toolfold.cli", "mcp", "--help"], tmp_path)
    assert "toolfold.cli._main_mcp" in unneeded(modules)


def test_help_imports_no_command_module(tmp_path: Path) -> None:
    modules = imported_by(["-m", "toolfold.cli", "--help"], tmp_path)
    assert heavy(modules) == []
    assert not [m for m in modules if m.startswith(("toolfold.harness", "toolfold.storage"))]


def test_the_check_sees_a_heavy_import(tmp_path: Path) -> None:
    """The assertion above can fail: a command that needs pydantic shows it."""
    modules = imported_by(["-c", "import toolfold.tools; toolfold.tools.READ", "run"], tmp_path)
    assert "pydantic" in heavy(modules)
    modules = imported_by(
        ["-c", "import toolfold.storage; toolfold.storage.MemoryRepository"], tmp_path
    )
    assert unneeded(modules) == ["toolfold.storage._entries", "toolfold.storage._memory"]


def test_a_bare_run_gets_what_click_would_parse() -> None:
    """``run -- COMMAND`` skips click with ``RUN_DEFAULTS``: the same arguments click's
    ``run`` receives for that command line, so the two paths run the same call."""
    from toolfold.cli._entry import RUN_DEFAULTS, bare_run
    from toolfold.cli._main import cli

    argv = ["--", "ls", "-l", "--json", "--"]
    command = bare_run(["run", *argv])
    assert command == ("ls", "-l", "--json", "--")
    run = cli.commands["run"]
    ctx = run.make_context("run", list(argv))
    assert ctx.params == {**RUN_DEFAULTS, "command": command}


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--"],
        ["run", "--json", "--", "true"],
        ["run", "true"],
        ["--help", "run", "--", "true"],
        ["sessions", "--", "true"],
    ],
)
def test_anything_but_a_bare_run_goes_through_click(args: list[str]) -> None:
    from toolfold.cli._entry import bare_run

    assert bare_run(args) is None


def test_shell_completion_goes_through_click(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolfold.cli._entry import COMPLETE_VAR, bare_run

    monkeypatch.setenv(COMPLETE_VAR, "bash_complete")
    assert bare_run(["run", "--", "true"]) is None
