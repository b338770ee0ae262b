"""How a ``toolfold run`` process ends: at once once the call has settled (no teardown of
the interpreter), with its exit handlers run, its output flushed, its exit status the
command's, and the call in the store; the ordinary exit whenever anything is unusual."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import clean_env, toolfold

from toolfold.cli import _process

# A process that runs `toolfold run` through `main()` as the console script does, with
# an exit handler and an object that says when the interpreter's teardown frees it.
ENTRY = """
import atexit, sys
class Witness:
    def __del__(self):
        sys.stderr.write("teardown\\n")
witness = Witness()
atexit.register(lambda: sys.stderr.write("exit handler\\n"))
from toolfold.cli import main
sys.argv = ["toolfold", *sys.argv[1:]]
{call}
"""


def entry(tmp_path: Path, call: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env["HOME"] = str(tmp_path)
    return subprocess.run(
        [sys.executable, "-c", ENTRY.format(call=call), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def test_run_ends_at_once_with_its_exit_handlers_output_status_and_record(
    tmp_path: Path,
) -> None:
    proc = entry(tmp_path, "main()", "run", "--session", "s1", "--", "echo out; exit 7")
    assert proc.returncode == 7, proc.stderr
    assert proc.stdout.startswith("out\n")  # the model's text, flushed
    assert "exit handler" in proc.stderr
    assert "exit status 7" in proc.stderr  # the summary line, flushed
    assert "teardown" not in proc.stderr  # the interpreter's teardown was skipped
    shown = toolfold(
        "show", "s1", "--json", cwd=tmp_path, env={**clean_env(), "HOME": str(tmp_path)}
    )
    assert shown.returncode == 0, shown.stderr
    assert "out" in json.dumps(json.loads(shown.stdout))


def test_the_ordinary_exit_for_main_called_with_arguments(tmp_path: Path) -> None:
    """In-process callers pass argv and get ``SystemExit`` as before; the interpreter then
    tears down as usual."""
    call = "try:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    print('status', e.code)"
    proc = entry(tmp_path, call, "run", "--", "exit 3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "status 3"
    assert "teardown" in proc.stderr and "exit handler" in proc.stderr


def test_other_commands_end_as_before(tmp_path: Path) -> None:
    assert entry(tmp_path, "main()", "run", "--session", "s1", "--", "true").returncode == 0
    proc = entry(tmp_path, "main()", "sessions")
    assert proc.returncode == 0, proc.stderr
    assert "s1" in proc.stdout
    assert "teardown" in proc.stderr


class _Exited(Exception):
    pass


@pytest.fixture
def no_process_exit(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``os._exit`` raises here instead, and the exit handlers are only counted: a test
    must neither end pytest's process nor run its exit handlers. Returns what ran."""
    ran: list[str] = []

    def refuse(status: int) -> None:
        raise _Exited(status)

    monkeypatch.setattr("os._exit", refuse)
    monkeypatch.setattr("atexit._run_exitfuncs", lambda: ran.append("exit handlers"))
    monkeypatch.setattr("threading.active_count", lambda: 1)  # pytest's own threads
    return ran


def test_end_process_ends_the_process_when_nothing_else_runs(no_process_exit: list[str]) -> None:
    with pytest.raises(_Exited) as ended:
        _process.end_process(7)
    assert ended.value.args == (7,)
    assert no_process_exit == ["exit handlers"]
    with pytest.raises(_Exited) as ended:
        _process.end_process(None)  # SystemExit(None) is status 0
    assert ended.value.args == (0,)


@pytest.mark.parametrize("code", ["a message", 256, -1, 1.5])
def test_end_process_takes_the_ordinary_exit_for_an_unusual_status(
    code: object, no_process_exit: list[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        _process.end_process(code)
    assert ended.value.code == code
    assert no_process_exit == []  # the ordinary exit runs them


def test_end_process_takes_the_ordinary_exit_while_another_thread_runs(
    monkeypatch: pytest.MonkeyPatch, no_process_exit: list[str]
) -> None:
    monkeypatch.setattr("threading.active_count", lambda: 2)
    with pytest.raises(SystemExit) as ended:
        _process.end_process(0)
    assert ended.value.code == 0
    assert no_process_exit == []


@pytest.mark.usefixtures("no_process_exit")
def test_end_process_takes_the_ordinary_exit_when_stdout_cannot_be_flushed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Closed:
        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    with pytest.raises(SystemExit) as ended:
        _process.end_process(0)
    assert ended.value.code == 0


def test_a_traced_run_still_exports_its_spans_and_metrics_at_exit(tmp_path: Path) -> None:
    """Under an OpenTelemetry SDK set up as ``opentelemetry-instrument`` does, the exit
    handlers that write the metrics run, and the call's spans are there."""
    traced = Path(__file__).resolve().parent.parent / "mcpserver" / "traced_main.py"
    spans = tmp_path / "spans.jsonl"
    env = clean_env()
    env["HOME"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, str(traced), str(spans), "-m", "toolfold.cli", "run", "--", "exit 6"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 6, proc.stderr
    names = {json.loads(line)["name"] for line in spans.read_text().splitlines()}
    assert "execute_tool bash" in names
    written = json.loads((tmp_path / "spans.jsonl.metrics.json").read_text())
    assert written  # the metrics handler ran at exit
