"""The README's quick start, executed from a clean clone: the README cannot drift from reality.

The clone sits alone in a temporary directory, so a test that reads anything outside the
repository fails here.
"""

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
    # Nothing but the clone: the suite must not read anything outside the repository
    # (e.g. a sibling directory that happens to sit beside a developer's checkout).
    assert sorted(p.name for p in target.parent.iterdir()) == ["toolfold"]
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
    # Then, as a newcomer would: the README's first shell example, exactly as printed,
    # after the line that puts `toolfold` on PATH.
    first = first_shell_example()
    shell = subprocess.run(
        ["bash", "-c", f"source .venv/bin/activate && {first}"],
        cwd=clean_clone,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shell.returncode == 0, (first, shell.stdout[-2000:], shell.stderr[-2000:])
    assert "100000" in shell.stdout and "spill" in shell.stdout.lower(), shell.stdout[-2000:]
    # The demo's closing lines run as printed too (`.venv/bin/toolfold ...`).
    closing = proc.stdout.split("Where to look", 1)[1].splitlines()[1:]
    for line in closing:
        command = line.split("#", 1)[0].strip()
        if "--store" not in command:
            continue
        ran = subprocess.run(
            ["bash", "-c", command], cwd=clean_clone, env=_clean_env(),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert ran.returncode == 0 and ran.stdout.strip(), (command, ran.stderr)


def first_shell_example() -> str:
    """The first command of the README's "Use it from the shell" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it from the shell", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    if block is None:
        raise AssertionError("README.md has no sh block under '## Use it from the shell'")
    return block.group(1).splitlines()[0].split("#", 1)[0].strip()


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


def _test_command_pytest_args() -> list[str]:
    """The README's test command runs ``dev.py test``; its pytest step is this interpreter's
    ``-m pytest`` (see dev.py), which the smoke runs below reuse with the current virtualenv
    instead of installing a fresh one."""
    test_command = quickstart_commands()[1].split()
    assert test_command[1:] == ["dev.py", "test"], test_command
    dev_py = (ROOT / "dev.py").read_text(encoding="utf-8")
    assert '"-m", "pytest"' in dev_py
    return [sys.executable, "-m", "pytest"]


def _clone_env(clone: Path) -> dict[str, str]:
    """This virtualenv's interpreter, importing toolfold from the clone (PYTHONPATH comes
    before the editable install's path entry)."""
    env = _clean_env()
    env["PYTHONPATH"] = str(clone / "src")
    return env


def test_clone_imports_its_own_toolfold(clean_clone: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", "import toolfold; print(toolfold.__file__)"],
        cwd=clean_clone,
        env=_clone_env(clean_clone),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert Path(proc.stdout.strip()).is_relative_to(clean_clone / "src"), proc.stdout


def test_whole_suite_collects_in_a_clone_with_nothing_beside_it(clean_clone: Path) -> None:
    proc = subprocess.run(
        [*_test_command_pytest_args(), "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=clean_clone,
        env=_clone_env(clean_clone),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    collected = re.search(r"(\d+) tests? collected", out)
    assert collected is not None and int(collected.group(1)) > 500, out[-2000:]
    # The recorded Chord vectors are in the clone, one test per line.
    assert "test_chord_vectors.py::test_decode_apply[decode-" in out, out[-2000:]


def test_chord_vector_tests_pass_in_a_clone_with_nothing_beside_it(clean_clone: Path) -> None:
    proc = subprocess.run(
        [
            *_test_command_pytest_args(),
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/chord/test_chord_vectors.py",
            "tests/chord/test_chord_scripts.py",
        ],
        cwd=clean_clone,
        env=_clone_env(clean_clone),
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed is not None and int(passed.group(1)) > 200, out[-2000:]
    assert "skipped" not in out, out[-2000:]
