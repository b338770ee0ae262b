"""The ``toolfold`` process starts up with the cyclic garbage collector off and runs its
command with it on (``_process.pause_collector`` / ``resume_collector``): what start-up
made is frozen, nothing of a long command's garbage waits for the process to end."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import clean_env

from toolfold.cli import _process

PROBE = """
import gc, subprocess, sys
import toolfold.cli._process as process

real_resume = process.resume_collector

def resume():
    print("before-resume", gc.isenabled(), file=sys.stderr)
    real_resume()

process.resume_collector = resume

class Popen(subprocess.Popen):
    def __init__(self, *args, **kwargs):
        print("at-spawn", gc.isenabled(), gc.get_freeze_count() > 0, file=sys.stderr)
        super().__init__(*args, **kwargs)

subprocess.Popen = Popen
sys.argv = ["toolfold", *sys.argv[1:]]
from toolfold.cli._entry import main
main()
"""


def _probe(tmp_path: Path, *args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=clean_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line for line in proc.stderr.splitlines() if line.startswith(("before", "at-"))]


def test_the_direct_run_starts_up_without_it_and_runs_the_command_with_it(
    tmp_path: Path,
) -> None:
    assert _probe(tmp_path, "run", "--", "true") == [
        "before-resume False",
        "at-spawn True True",
    ]


def test_the_asyncio_path_runs_the_command_with_it(tmp_path: Path) -> None:
    lines = _probe(tmp_path, "run", "--retain", "tail", "--", "true")
    assert lines and all(line == "at-spawn True True" for line in lines), lines


def test_resume_does_nothing_unless_pause_turned_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_process, "_collector_paused", False)
    monkeypatch.setattr(_process, "_startup_frozen", False)
    gc.disable()
    try:
        _process.resume_collector()  # someone else's choice: left alone
        assert not gc.isenabled()
        _process.pause_collector()  # already off: not ours to turn back on
        _process.resume_collector()
        assert not gc.isenabled()
    finally:
        gc.enable()
    frozen = gc.get_freeze_count()
    _process.pause_collector()
    assert not gc.isenabled()
    _process.resume_collector()
    assert gc.isenabled() and gc.get_freeze_count() >= frozen
    _process.collector_as_before()  # what the ordinary exit's teardown needs
    assert gc.isenabled() and gc.get_freeze_count() == 0
