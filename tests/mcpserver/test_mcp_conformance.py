"""The official MCP conformance suite (``@modelcontextprotocol/conformance``) against
``toolfold mcp --http`` serving the fixture tools of ``conformance_tools.py``.

Every scenario must pass, or be listed in docs/mcp.md ("Conformance") with the reason
it does not apply; a scenario that starts passing must leave the list too. The suite
sends no credentials, so it reaches the server through ``auth_forwarder.py``, which
adds the bearer token and passes everything else (Host and Origin included) as is.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import HTTP_TOKEN, TOOLFOLD, clean_env, free_port, http_server, poll, store_url

HERE = Path(__file__).parent
DOC = (HERE.parents[1] / "docs" / "mcp.md").read_text()
TOOLS = ("--tools", "conformance_tools:TOOLS", "--no-builtin")
TASK_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
TASKS = ("--task-after", "0", "--task-after", "greet=never", "--task-after", "failing_job=required")
"""Every call of a client that negotiated tasks is a task, except greet, which the
suite calls as a tool that answers at once; failing_job requires a task."""
RESTART_SCENARIOS = (
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-request-headers",
    "tasks-lifecycle",
)
"""The tasks scenarios that pass with the server killed after each task it creates
(docs/mcp.md, "Conformance", says why the others are not here)."""


def documented() -> dict[str, str]:
    """Scenario -> reason, from the table under docs/mcp.md's "Conformance" heading."""
    section = DOC.split("\n### Conformance\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([a-z0-9-]+)` \| (.+?) \|$", section, re.M))


@pytest.fixture(autouse=True)
def _importable_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    # The server imports conformance_tools (--tools) from this directory.
    monkeypatch.setenv("PYTHONPATH", str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@contextlib.contextmanager
def forwarded(tmp_path: Path, *args: str) -> Iterator[str]:
    """A ``toolfold mcp --http ARGS`` behind the token-adding forwarder; its URL."""
    with http_server(tmp_path, *args) as (url, _):
        upstream = int(url.split(":")[2].split("/")[0])
        port = free_port()
        with open(tmp_path / "forwarder.err", "w") as err:
            forwarder = subprocess.Popen(
                [sys.executable, str(HERE / "auth_forwarder.py"), str(port), str(upstream)],
                env=clean_env() | {"TOOLFOLD_TOKEN": HTTP_TOKEN},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:

            def listening() -> bool:
                assert forwarder.poll() is None, (tmp_path / "forwarder.err").read_text()
                with socket.socket() as probe:
                    return probe.connect_ex(("127.0.0.1", port)) == 0

            poll(listening, "the forwarder to listen")
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            forwarder.kill()
            forwarder.wait()


def run_suite(suite: tuple[Path, Path], url: str, out: Path, *args: str) -> str:
    """Run the suite's ``server`` command; its output (for failure messages)."""
    node, cli = suite
    done = subprocess.run(
        [str(node), str(cli), "server", "--url", url, "-o", str(out), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env=clean_env(),
    )
    return done.stdout[-4000:] + done.stderr[-2000:]


def outcomes(out: Path) -> dict[str, set[str]]:
    """Scenario -> the statuses of its checks."""
    found: dict[str, set[str]] = {}
    for checks in out.glob("*/checks.json"):
        scenario = re.sub(r"^server-|-\d{4}-\d\d-\d\dT.*$", "", checks.parent.name)
        found.setdefault(scenario, set()).update(
            c["status"] for c in json.loads(checks.read_text())
        )
    return found


def check_against_docs(found: dict[str, set[str]], log: str) -> None:
    listed = {s for s in documented() if s in found}
    not_passing = {
        s for s, statuses in found.items() if statuses & {"FAILURE", "WARNING", "SKIPPED"}
    }
    assert not_passing - listed == set(), "not passing and not in docs/mcp.md:\n" + log
    assert listed - not_passing == set(), "passing now: take them out of docs/mcp.md"


def test_the_protocol_scenarios_pass_or_the_docs_say_why(
    tmp_path: Path, conformance_suite: tuple[Path, Path]
) -> None:
    with forwarded(tmp_path, *TOOLS) as url:
        log = run_suite(conformance_suite, url, tmp_path / "out", "--suite", "all")
    found = outcomes(tmp_path / "out")
    assert len(found) >= 30, log
    check_against_docs(found, log)
    for scenario in (
        "server-initialize",
        "ping",
        "tools-list",
        "tools-call-simple-text",
        "tools-call-image",
        "tools-call-error",
        "tools-call-with-progress",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ):
        assert found[scenario] <= {"SUCCESS", "INFO"}, scenario


def test_the_tasks_scenarios_pass_or_the_docs_say_why(
    tmp_path: Path, conformance_next: tuple[Path, Path]
) -> None:
    logs = []
    with forwarded(tmp_path, *TOOLS, *TASKS) as url:
        for scenario in TASK_SCENARIOS:
            logs.append(run_suite(conformance_next, url, tmp_path / "out", "--scenario", scenario))
    found = outcomes(tmp_path / "out")
    assert set(found) == set(TASK_SCENARIOS), "\n".join(logs)
    check_against_docs(found, "\n".join(logs))
    assert found["tasks-wire-fields"] <= {"SUCCESS", "INFO"}
    assert found["tasks-capability-negotiation"] <= {"SUCCESS", "INFO"}


@contextlib.contextmanager
def restarting(tmp_path: Path, *args: str) -> Iterator[str]:
    """A ``toolfold mcp --http ARGS`` behind ``restart_forwarder.py``, which kills it
    with SIGKILL after each task it creates and starts it again on the same port,
    store, session and token; the forwarder's URL."""
    port, upstream = free_port(), free_port()
    server = [
        *TOOLFOLD,
        "mcp",
        "--http",
        "--port",
        str(upstream),
        "--store",
        store_url(tmp_path),
        "--session",
        "h1",
        *args,
    ]
    with open(tmp_path / "forwarder.err", "w") as err:
        forwarder = subprocess.Popen(
            [sys.executable, str(HERE / "restart_forwarder.py"), str(port), str(tmp_path), *server],
            cwd=tmp_path,
            env=clean_env() | {"TOOLFOLD_TOKEN": HTTP_TOKEN},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:

        def listening() -> bool:  # the forwarder listens once its server does
            assert forwarder.poll() is None, (tmp_path / "forwarder.err").read_text()
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        poll(listening, "the forwarder and its server to listen", tries=2400)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        forwarder.terminate()  # it kills its server as it exits
        try:
            forwarder.wait(timeout=60)
        finally:
            forwarder.kill()
            forwarder.wait()
            with contextlib.suppress(ProcessLookupError, FileNotFoundError, ValueError):
                os.killpg(int((tmp_path / "server.pid").read_text()), signal.SIGKILL)


def test_tasks_scenarios_pass_with_a_kill_9_between_creating_a_task_and_getting_it(
    tmp_path: Path, conformance_next: tuple[Path, Path]
) -> None:
    # Each scenario against its own server, killed right after each answer that
    # created a task has been relayed, and started again on the same store and
    # --session before the client's next request (its tasks/get) is passed on.
    logs, restarts = [], {}
    for scenario in RESTART_SCENARIOS:
        here = tmp_path / scenario
        here.mkdir()
        with restarting(here, *TOOLS, *TASKS) as url:
            logs.append(run_suite(conformance_next, url, tmp_path / "out", "--scenario", scenario))
        done = here / "restarts"  # a line per restart
        restarts[scenario] = len(done.read_text().splitlines()) if done.exists() else 0
    log = "\n".join(logs) + f"\nrestarts per scenario: {restarts}"
    found = outcomes(tmp_path / "out")
    assert set(found) == set(RESTART_SCENARIOS), log
    for scenario, statuses in found.items():
        assert statuses <= {"SUCCESS", "INFO"}, scenario + "\n" + log
        assert restarts[scenario] >= 1, scenario + "\n" + log
