"""The README's quick start, executed from a clean clone: the README cannot drift from reality."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def quickstart_commands() -> list[str]:
    """The shell commands in the README's "Quick start" code block (comments stripped)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1]
    block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", section, re.S)
    if block is None:
        raise AssertionError("README.md has no code block under '## Quick start'")
    commands = []
    for line in block.group(1).splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            commands.append(command)
    return commands


def test_quickstart_has_exactly_two_commands() -> None:
    commands = quickstart_commands()
    assert len(commands) == 2, commands
    assert commands[0].startswith("python3 ") and commands[1].startswith("python3 ")


@pytest.fixture(scope="module")
def clean_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh clone of the committed tree, as CI gets it (no .venv, no build files)."""
    if os.environ.get("TOOLFOLD_QUICKSTART_CHILD"):
        pytest.fail("the quick-start test must not run inside its own clone (recursion)")
    target = tmp_path_factory.mktemp("quickstart") / "toolfold"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-local", str(ROOT), str(target)],
        check=True,
        capture_output=True,
    )
    # CI keeps ../shared beside the clone; the test-suite vectors live there.
    shared = ROOT.parent / "shared"
    if shared.exists():
        (target.parent / "shared").symlink_to(shared)
    return target


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["TOOLFOLD_QUICKSTART_CHILD"] = "1"
    return env


def _python3() -> str:
    found = shutil.which("python3", path=_clean_env()["PATH"])
    if found is None:
        raise AssertionError("python3 is not on PATH; the README promises it is all you need")
    return found


@pytest.mark.slow
def test_quickstart_main_job_runs_from_a_clean_clone(clean_clone: Path) -> None:
    main_job = quickstart_commands()[0].split()
    proc = subprocess.run(
        [_python3(), *main_job[1:]],
        cwd=clean_clone,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert (clean_clone / ".venv").is_dir()
    assert "toolfold" in proc.stdout.lower()


@pytest.mark.slow
def test_quickstart_test_command_runs_from_a_clean_clone(clean_clone: Path) -> None:
    test_command = quickstart_commands()[1].split()
    # The same command, with pytest narrowed to one small file: running the whole suite
    # here would run this test again inside its own clone.
    proc = subprocess.run(
        [_python3(), *test_command[1:], "tests/test_exports.py", "-q"],
        cwd=clean_clone,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "all checks passed" in out
    assert re.search(r"\d+ passed", out), out[-2000:]
