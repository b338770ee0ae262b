"""What a new user meets first: a missing extra named with a command that works, the
demo's closing lines runnable as printed, one demo directory however often it runs, and a
serve URL a browser can open."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from cli_helpers import clean_env, one_error_line, toolfold

from toolfold.cli._serve import ServeOptions

TOKEN = "t" * 32


def test_a_postgres_store_without_its_driver_names_the_extra(tmp_path: Path) -> None:
    # The core install has no psycopg: a None in sys.modules makes its import fail the
    # same way (ModuleNotFoundError naming it).
    code = (
        "import sys; sys.modules['psycopg'] = None; from toolfold.cli import main; "
        "sys.argv = ['toolfold', 'sessions', '--store', 'postgresql://u:secret@127.0.0.1/x']; "
        "main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = one_error_line(proc)
    assert "needs the postgres extra (psycopg is not installed)" in line
    assert "pip install" in line and "[postgres]" in line
    assert "secret" not in line  # the password stays masked


def test_install_hint_names_this_checkout() -> None:
    from toolfold._extras import install_hint

    root = Path(__file__).resolve().parents[2]
    assert install_hint("mcp") == f"{sys.executable} -m pip install -e '{root}[mcp]'"


def _where_to_look(stdout: str) -> list[str]:
    lines = stdout.split("Where to look", 1)[1].splitlines()[1:]
    return [line.split("#", 1)[0].strip() for line in lines if "--store" in line]


def test_demo_closing_commands_run_as_printed_and_one_directory_is_kept(
    tmp_path: Path,
) -> None:
    env = clean_env()
    for _ in range(2):  # a second run replaces the first one's directory
        proc = toolfold("demo", cwd=tmp_path, env=env, timeout=180)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / ".toolfold").iterdir()) == ["demo"]
    demo = tmp_path / ".toolfold" / "demo"
    assert (demo / ".toolfold-demo").is_file()
    assert oct(demo.stat().st_mode & 0o777) == "0o700"
    commands = _where_to_look(proc.stdout)
    assert len(commands) == 3, proc.stdout[-2000:]
    # The tests run toolfold as `python -m toolfold.cli`: the printed command says so,
    # so the lines work in a shell exactly as shown.
    for command in commands:
        ran = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert ran.returncode == 0, (command, ran.stderr)
        assert ran.stdout.strip(), command
    listed = subprocess.run(
        ["bash", "-c", commands[0]], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["demo", "demo-crash"]


def test_demo_refuses_a_default_directory_it_did_not_make(tmp_path: Path) -> None:
    mine = tmp_path / ".toolfold" / "demo"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine\n")
    line = one_error_line(toolfold("demo", cwd=tmp_path, timeout=60))
    assert "was not made by `toolfold demo`; move it away or pass --dir" in line
    assert (mine / "notes.txt").read_text() == "mine\n"


def test_demo_names_the_program_by_a_path_that_runs(tmp_path: Path) -> None:
    # Started as a script that is not on PATH (.venv/bin/toolfold, not activated), the
    # closing lines name it by that path, and say how to get `toolfold` alone.
    script = tmp_path / "bin" / "toolfold"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\nfrom toolfold.cli import main\nmain()\n")
    script.chmod(0o755)
    env = clean_env()
    env["PATH"] = os.pathsep.join(
        p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "toolfold").exists()
    )
    proc = subprocess.run(
        ["bin/toolfold", "demo"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    commands = _where_to_look(proc.stdout)
    assert all(shlex.split(c)[0] == "bin/toolfold" for c in commands), commands
    assert "`source bin/activate`" in proc.stdout


def test_a_wildcard_bind_prints_a_url_a_browser_can_open() -> None:
    anywhere = ServeOptions.checked("0.0.0.0", 8765, TOKEN, (), False)
    assert anywhere.url == f"http://127.0.0.1:8765/?token={TOKEN}"
    named = ServeOptions.checked("0.0.0.0", 8765, TOKEN, ("box.lan",), False)
    assert named.url == f"http://box.lan:8765/?token={TOKEN}"
    v6 = ServeOptions.checked("::", 8765, TOKEN, (), False)
    assert v6.url == f"http://127.0.0.1:8765/?token={TOKEN}"
    direct = ServeOptions.checked("192.168.1.5", 8765, TOKEN, (), False)
    assert direct.url == f"http://192.168.1.5:8765/?token={TOKEN}"


async def _adapter_session(url: str, target: Path) -> None:
    """Two runs of a harness with a durable session, as the framework adapters make them,
    each with a call id ``c1`` (frameworks number their calls per run)."""
    from toolfold.execenv import LocalExecEnv
    from toolfold.harness import Durability, DurableHooks, Harness, ToolCall, ToolContext
    from toolfold.storage import open_repository
    from toolfold.tools import builtin_tools

    repo = open_repository(url)
    try:
        session = await repo.create_session("adapted")
        for path in ("one.txt", "two.txt"):
            harness = Harness(
                builtin_tools(),
                context=ToolContext(env=LocalExecEnv(target / "spill"), cwd=target),
                hooks=DurableHooks(Durability(session)),
            )
            [result] = await harness.run([ToolCall("c1", "read", {"path": str(target / path)})])
            assert not result.is_error, result.text
    finally:
        await repo.close()


async def test_calls_made_through_an_adapter_say_what_they_did(tmp_path: Path) -> None:
    for name in ("one.txt", "two.txt"):
        (tmp_path / name).write_text(f"{name}\n")
    url = f"sqlite:{tmp_path / 'store.db'}"
    await _adapter_session(url, tmp_path)
    listed = toolfold("sessions", "--store", url, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    [row] = listed.stdout.splitlines()[1:]
    assert row.split()[:3] == ["adapted", "2", "0"] and "two.txt" in row, row
    shown = toolfold("show", "adapted", "--store", url, cwd=tmp_path)
    rows = shown.stdout.splitlines()[1:]
    assert [r.split()[1] for r in rows] == ["c1", "c1"]
    assert "one.txt" in rows[0] and "two.txt" in rows[1], rows
    # The id both calls share names neither of them: the user is told to give a number.
    line = one_error_line(toolfold("show", "adapted", "c1", "--store", url, cwd=tmp_path))
    assert line == (
        "toolfold: error: call 'c1' is ambiguous in session 'adapted': 2 calls have that id; "
        "give its number (see `toolfold show adapted`)"
    )
    second = toolfold("show", "adapted", "2", "--store", url, cwd=tmp_path)
    assert second.returncode == 0 and "two.txt" in second.stdout, second.stderr
