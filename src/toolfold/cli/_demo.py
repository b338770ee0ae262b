"""``toolfold demo``: a short guided tour on a SQLite store in ``.toolfold/demo``."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import shutil
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

from toolfold._fsperm import make_private_dirs
from toolfold.execenv import LocalExecEnv
from toolfold.harness import Harness, ToolCall, ToolContext, ToolSettled, ToolUpdate
from toolfold.output import OutputPolicy, output_text
from toolfold.tools import PYTEST

from ._calls import find_call, list_calls, pending_output
from ._errors import CliError
from ._inspect import resume_command
from ._run import RunSettings, run_call
from ._store import StoreSpec, open_existing_session, open_store, resolve_store
from ._view import CallWatcher

BUILD_LOG = (
    'for i in $(seq 1 3000); do echo "[$i/3000] compiling src/module_$i.c"; '
    "if [ $((i % 500)) -eq 0 ]; then sleep 0.1; fi; done; "
    "echo 'linking toolfold-demo'; echo 'build finished: 3000 objects, 0 warnings'"
)

FAILING = (
    "echo 'configuring...'; echo 'compiling main.c'; "
    "echo 'main.c:42: error: expected ; before }' >&2; exit 2"
)

TESTS = """
import time

import pytest


@pytest.mark.parametrize("n", range(1, 7))
def test_step(n):
    time.sleep(0.1)
    assert n != 5, "step 5 is the one that fails, on purpose"
"""

CRASH_STEPS = 8
KILL_AFTER_MEMO = 3


def _say(text: str = "") -> None:
    print(text, flush=True)


def _title(n: int, text: str) -> None:
    _say()
    _say(f"== {n}. {text} " + "=" * max(0, 66 - len(text)))


def _live() -> bool:
    return sys.stdout.isatty() and sys.stderr.isatty()


async def demo_command(directory: str | None) -> int:
    """Run the tour; return 0 when every step behaved as described."""
    home = Path(directory) if directory else _fresh_default_home()
    home.mkdir(parents=True, exist_ok=True)
    spec = resolve_store(f"sqlite:{home / 'toolfold.db'}")
    _say(f"toolfold demo: store {spec.describe()} (SQLite, the embedded default)")

    _title(1, "a long build log, kept as a tail window with a spill file")
    _say(f"$ toolfold run --max-lines 12 -- {BUILD_LOG[:60]}...")
    _say("The model receives only the window and a footer naming the spill file:")
    policy = OutputPolicy(retain="tail", max_lines=12)
    code = await run_call(RunSettings(spec, "demo", BUILD_LOG, policy, live=_live()))
    if code != 0:
        raise CliError(f"demo step 1: the build log command exited {code}, expected 0")
    spill = await _spill_of_last_call(spec, "demo")
    if spill is not None:
        lines = sum(1 for _ in spill.open("rb"))
        _say(f"-> the spill file holds all {lines:,} lines: {spill}")

    _title(2, "the pytest tool updates its details live")
    await _pytest_step(spec, home)

    _title(3, "a failing command keeps its partial output")
    _say("(this step fails on purpose: it shows what a failure looks like)")
    _say(f"$ toolfold run -- {FAILING}")
    code = await run_call(RunSettings(spec, "demo", FAILING, OutputPolicy(), live=_live()))
    _say(
        f"-> exit status {code} (the command's own, as intended), and the output before "
        "the error is kept"
    )
    if code != 2:
        raise CliError(f"demo step 3: the failing command exited {code}, expected 2")

    _title(4, "kill -9 a memoising tool mid-way, then resume it")
    ok = await _crash_step(spec)

    _say()
    _say("Where to look (each line runs as shown, from this directory):")
    store = f"--store {spec.describe()}"
    command = toolfold_command()
    _say(f"  {command} sessions {store}")
    _say(f"  {command} show demo {store}            # the build, pytest and failing calls")
    _say(f"  {command} show demo-crash 1 {store}    # the resumed memoising tool")
    _say(f"  spill files: {spec.spill_dir('demo')}")
    if directory:
        _say(f"  everything: {home} (delete it when done)")
    else:
        _say(f"  everything: {home} (the next demo run replaces it; delete it when done)")
    if Path(command).name == "toolfold" and command != "toolfold":
        _say(f"  (`toolfold` alone works once {Path(command).parent} is on PATH, e.g. after")
        _say(f"  `source {Path(command).parent / 'activate'}`)")
    return 0 if ok else 1


DEMO_MARKER = ".toolfold-demo"
"""A file in the default demo directory: only a directory holding it is replaced."""


def _fresh_default_home() -> Path:
    """``.toolfold/demo`` under the working directory, emptied of a previous demo run, so
    repeated runs leave one directory behind, not one each. Anything there that a demo
    did not make is left alone (the user is told to pass ``--dir``)."""
    home = Path(".toolfold", "demo").absolute()
    if home.is_symlink() or (home.exists() and not (home / DEMO_MARKER).is_file()):
        raise CliError(
            f"{home} exists and was not made by `toolfold demo`; move it away or pass --dir"
        )
    if home.exists():
        shutil.rmtree(home)
    make_private_dirs(home)
    (home / DEMO_MARKER).write_text("made by `toolfold demo`; the next run replaces it\n")
    return home


def toolfold_command() -> str:
    """How to start this toolfold from the user's shell as it is now: ``toolfold`` when
    that name finds this very program on PATH, else the program's path (relative to the
    working directory when it is below it, e.g. ``.venv/bin/toolfold``)."""
    script = Path(sys.argv[0])
    if script.name != "toolfold" or not script.is_file():
        on_path = shutil.which("toolfold")
        return "toolfold" if on_path else f"{sys.executable} -m toolfold.cli"
    on_path = shutil.which("toolfold")
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return "toolfold"
    where = script.absolute()
    try:
        return str(where.relative_to(Path.cwd()))
    except ValueError:
        return str(where)


async def _spill_of_last_call(spec: StoreSpec, session_name: str) -> Path | None:
    async with open_store(spec, create=False) as repo:
        session = await open_existing_session(repo, spec, session_name)
        calls = await list_calls(session)
        text = output_text(calls[-1].message) if calls and calls[-1].message else ""
    found = re.search(r"Full output: (\S+)\]", text)
    return Path(found.group(1)) if found else None


async def _pytest_step(spec: StoreSpec, home: Path) -> None:
    if importlib.util.find_spec("pytest") is None:
        _say("(skipped: pytest is not installed here; `pip install pytest` to see this step)")
        return
    tests = home / "demo_tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_demo_steps.py").write_text(textwrap.dedent(TESTS).lstrip())
    _say(f"$ pytest {tests}   (through the harness; each line is a details change)")
    async with open_store(spec, create=True) as repo:
        session = await repo.open_session("demo", create=True)
        harness = Harness(
            [PYTEST],
            context=ToolContext(env=LocalExecEnv(spec.spill_dir("demo")), cwd=home),
            session=session,
        )
        watcher = CallWatcher()
        last: list[str] = [""]

        def on_event(event: Any) -> None:
            watcher.handle(event)
            if isinstance(event, ToolUpdate | ToolSettled) and isinstance(watcher.state, dict):
                d = watcher.state.get("details") or {}
                line = (
                    f"  details: total={d.get('total', 0)} passed={d.get('passed', 0)} "
                    f"failed={d.get('failed', 0)}"
                    + (f" running={d['current']}" if d.get("current") else "")
                )
                if line != last[0]:
                    last[0] = line
                    _say(line)

        harness.bus.add_listener(on_event)
        call = ToolCall("call-pytest", PYTEST.name, {"path": str(tests), "args": ["-q"]})
        [result] = await harness.run([call])
    failures = result.details.get("failures") or []
    names = ", ".join(str(f.get("name", "")).split("::")[-1] for f in failures)
    _say(
        f"-> settled as {result.outcome}: {result.details.get('passed')} passed, "
        f"{result.details.get('failed')} failed ({names}); the details are in the transcript"
    )


async def _crash_step(spec: StoreSpec) -> bool:
    _say(
        f"A replay-safe tool runs {CRASH_STEPS} steps; after each it writes a line and "
        "memoises the step\n(memo and output checkpoint commit in one transaction). "
        f"We SIGKILL its process after memo {KILL_AFTER_MEMO}."
    )
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "toolfold.cli._demo_child",
        spec.url,
        "demo-crash",
        str(CRASH_STEPS),
        "0.15",
        str(KILL_AFTER_MEMO),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    stdout = child.stdout
    if stdout is None:  # stdout=PIPE guarantees it; for the type checker
        raise CliError("demo step 4: the child process has no stdout pipe")
    killed = False
    while raw := await stdout.readline():
        _say(f"  child: {raw.decode().strip()}")
        if raw.strip() == f"memo {KILL_AFTER_MEMO}".encode():
            child.send_signal(signal.SIGKILL)
            killed = True
            break
    code = await child.wait()
    if child.stdin is not None:
        child.stdin.close()
    if not killed:
        raise CliError(
            f"demo step 4: the child ended (status {code}) before memo {KILL_AFTER_MEMO}"
        )
    _say(f"  child killed with SIGKILL (status {code})")
    async with open_store(spec, create=False) as repo:
        session = await open_existing_session(repo, spec, "demo-crash")
        state = await pending_output(session, await find_call(session, "1"))
    text = output_text(state)
    _say("  the store holds its pending output (toolfold show demo-crash 1):")
    for line in text.splitlines():
        _say(f"    | {line}")
    _say("$ toolfold resume demo-crash")
    await resume_command(spec, "demo-crash")
    async with open_store(spec, create=False) as repo:
        session = await open_existing_session(repo, spec, "demo-crash")
        calls = await list_calls(session)
    message = calls[0].message or {}
    final = output_text(message)
    for line in final.splitlines():
        _say(f"    | {line}")
    done = [final.count(f"step {i}/{CRASH_STEPS}: done\n") for i in range(1, CRASH_STEPS + 1)]
    working = [final.count(f"step {i}/{CRASH_STEPS}: working\n") for i in range(1, CRASH_STEPS + 1)]
    if (
        done == [1] * CRASH_STEPS
        and working == [1] * CRASH_STEPS
        and message.get("outcome") == "ok"
    ):
        _say(f"-> nothing lost, nothing duplicated: each of the {CRASH_STEPS} steps appears once")
        return True
    _say(
        f"-> UNEXPECTED: step counts done={done} working={working} outcome={message.get('outcome')}"
    )
    return False
