"""Durable serve commands and stored history over real SQLite and JSONL stores.

A command posted to ``POST /v1/lanes/{lane}/commands`` runs as a durable bash call in
session ``lane``; it settles into the store, ``GET /v1/sessions/{name}/calls`` serves
it (with the truncation totals and spill file), and it is still there after the app
restarts on the same store. Bad and unknown session names get clear JSON errors.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfold.harness import Lanes
from toolfold.server import HarnessCommands, create_app
from toolfold.storage import Repository, open_repository

STORES = ["sqlite", "jsonl"]


def _url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":  # a store makes no directory above its file
        (tmp_path / "store").mkdir(exist_ok=True)
    return (
        f"sqlite:{tmp_path / 'store' / 'toolfold.db'}"
        if kind == "sqlite"
        else (f"jsonl:{tmp_path / 'store'}")
    )


class Served:
    """One app on a store: the server thread, its lanes, its runner and an HTTP client."""

    def __init__(
        self, server: Any, lanes: Lanes, commands: HarnessCommands | None, repo: Repository
    ) -> None:
        self.server = server
        self.lanes = lanes
        self.commands = commands
        self.repo = repo
        self.client = server.client(timeout=60)

    def post(self, lane: str, command: str) -> str:
        r = self.client.post(f"/v1/lanes/{lane}/commands", json={"command": command})
        assert r.status_code == 202, r.text
        return str(r.json()["tool_call_id"])

    def settle(self) -> None:
        """Wait (on the server's loop) until every posted command has settled."""
        assert self.commands is not None
        self.server.run(self.commands.wait())

    def calls(self, session: str, **params: Any) -> Any:
        r = self.client.get(f"/v1/sessions/{session}/calls", params=params)
        assert r.status_code == 200, r.text
        return r.json()

    def close(self) -> None:
        """Stop the server, then close the store on a loop of its own."""
        self.client.close()
        self.server.stop()
        self.server.stop = lambda: None  # the `serve` fixture's teardown is then a no-op
        asyncio.run(self.repo.close())


@pytest.fixture
def start(serve: Callable[[Any], Any], tmp_path: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def _start(url: str, *, runner: bool = True) -> Served:
        repo = open_repository(url)
        lanes = Lanes()
        commands = (
            HarnessCommands(lanes, repository=repo, spill_dir=tmp_path / "spill", cwd=tmp_path)
            if runner
            else None
        )
        app = create_app(lanes=lanes, run_command=commands, repository=repo)
        served = Served(serve(app), lanes, commands, repo)
        started.append(served)
        return served

    yield _start
    for served in started:
        if not served.repo.closed:
            served.close()


@pytest.mark.parametrize("kind", STORES)
def test_posted_commands_settle_into_the_store_and_survive_a_restart(
    kind: str, tmp_path: Path, start: Callable[..., Served]
) -> None:
    url = _url(kind, tmp_path)
    first = start(url)
    long_id = first.post("main", "seq 1 2500")
    first.settle()
    failed_id = first.post("main", "echo partial output; exit 3")
    first.settle()

    body = first.calls("main")
    assert body["session"] == "main" and body["total"] == 2
    long, failed = body["calls"]
    assert [long["tool_call_id"], failed["tool_call_id"]] == [long_id, failed_id]
    assert long["settled"] is True and long["status"] == "ok" and long["command"] == "seq 1 2500"
    text = long["message"]["content"][0]["text"]
    assert "2500" in text and "\n1\n" not in text  # a tail window: the start was cut
    assert long["message"]["details"]["exit_code"] == 0
    # The truncation totals and the spill file were recorded beside the settled result.
    assert long["truncation"]["truncated"] is True and long["truncation"]["total_lines"] == 2500
    spill = Path(long["spill_path"])
    assert spill.parent == tmp_path / "spill" / "main"
    assert spill.read_text().splitlines() == [str(i) for i in range(1, 2501)]
    assert failed["status"] == "error" and failed["message"]["is_error"] is True
    assert failed["message"]["details"]["exit_code"] == 3
    assert "partial output" in failed["message"]["content"][0]["text"]
    assert failed["truncation"]["truncated"] is False and failed["spill_path"] is None
    assert first.client.get("/v1/sessions").json() == {"sessions": ["main"]}
    assert first.calls("main", limit=1)["calls"] == [failed]
    first.close()

    # A new app on the same store (no runner at all): the same history.
    again = start(url, runner=False)
    assert again.calls("main") == body
    again.close()

    # And the CLI reads the same session.
    from toolfold.cli._inspect import show_command
    from toolfold.cli._store import resolve_store

    shown = asyncio.run(show_command(resolve_store(url), "main", None, as_json=False))
    assert shown == 0


@pytest.mark.parametrize("kind", STORES)
def test_show_lists_calls_run_from_the_viewer(
    kind: str, tmp_path: Path, start: Callable[..., Served], capsys: pytest.CaptureFixture[str]
) -> None:
    url = _url(kind, tmp_path)
    served = start(url)
    call_id = served.post("build", "echo hello from the viewer")
    served.settle()
    served.close()
    from toolfold.cli._inspect import show_command
    from toolfold.cli._store import resolve_store

    capsys.readouterr()
    assert asyncio.run(show_command(resolve_store(url), "build", None, as_json=True)) == 0
    import json

    listed = json.loads(capsys.readouterr().out)
    assert listed == [
        {
            "number": 1,
            "tool_call_id": call_id,
            "tool_name": "bash",
            "status": "ok",
            "what": "echo hello from the viewer",
        }
    ]
    assert asyncio.run(show_command(resolve_store(url), "build", "1", as_json=False)) == 0
    assert capsys.readouterr().out == "hello from the viewer\n"


def test_a_running_command_is_listed_with_its_pending_output_then_settles(
    tmp_path: Path, start: Callable[..., Served]
) -> None:
    # JSONL: one writer per session, so the API must read through the runner's session.
    served = start(_url("jsonl", tmp_path))
    gate = tmp_path / "gate"
    call_id = served.post("main", f"echo started; while [ ! -e {gate} ]; do sleep 0.02; done")

    def pending() -> Any:
        # Empty until the run has recorded its operation (the POST returns before).
        for call in served.calls("main")["calls"]:
            state = call.get("state")
            if state and "started" in state["content"][0]["text"]:
                return call
        return None

    call = _wait_for(pending, "the pending output to be checkpointed")
    assert call["tool_call_id"] == call_id
    assert call["settled"] is False and call["status"] == "unsettled" and call["running"] is True
    assert call["message"] is None and call["command"].startswith("echo started")
    gate.write_text("go")
    served.settle()
    [call] = served.calls("main")["calls"]
    assert call["settled"] is True and call["status"] == "ok"
    assert call["message"]["content"][0]["text"] == "started\n"
    assert "state" not in call and "running" not in call


def test_shutdown_settles_a_running_command_into_the_store(
    tmp_path: Path, start: Callable[..., Served]
) -> None:
    url = _url("sqlite", tmp_path)
    served = start(url)
    gate = tmp_path / "never"
    call_id = served.post("main", f"echo started; while [ ! -e {gate} ]; do sleep 0.02; done")
    _wait_for(
        lambda: _running_with_output(served, "main", call_id, "started"),
        "the command to print its first line",
    )
    served.close()  # cancels the run: its partial output settles, then the store closes
    again = start(url, runner=False)
    [call] = again.calls("main")["calls"]
    assert call["tool_call_id"] == call_id and call["settled"] is True
    assert call["status"] in ("cancelled", "interrupted")
    text = call["message"]["content"][0]["text"]
    assert text.startswith("started\n") and "partial" in text


def test_bad_and_unknown_sessions_get_clear_json_errors(
    tmp_path: Path, start: Callable[..., Served]
) -> None:
    served = start(_url("sqlite", tmp_path))
    served.post("main", "true")
    served.settle()
    c = served.client
    r = c.get("/v1/sessions/.hidden/calls")
    assert r.status_code == 400
    assert r.json()["error"].startswith("invalid session name '.hidden': use 1-128 characters")
    r = c.get("/v1/sessions/nope/calls")
    assert r.status_code == 404
    assert r.json()["error"] == "no session 'nope' in the store (sessions: main); GET /v1/sessions"
    r = c.get("/v1/sessions/main/calls", params={"limit": "0"})
    assert r.status_code == 400
    assert r.json()["error"] == (
        "limit must be an integer from 1 to 1000, got '0' (the default is 100)"
    )
    # A valid lane that cannot be a session: refused before anything runs or is written.
    r = c.post("/v1/lanes/.dot/commands", json={"command": "touch ran"})
    assert r.status_code == 400
    assert r.json()["error"].startswith(
        "lane '.dot' cannot be a session of the store (invalid session name '.dot'"
    )
    assert not (tmp_path / "ran").exists()
    assert c.get("/v1/sessions").json() == {"sessions": ["main"]}
    assert served.calls("main")["total"] == 1
    # A session the viewer never wrote to is not created by reading it.
    assert c.get("/v1/sessions/fresh/calls").status_code == 404
    assert c.get("/v1/sessions").json() == {"sessions": ["main"]}


def test_calls_without_a_store_answer_501(serve: Callable[[Any], Any]) -> None:
    server = serve(create_app())
    with server.client() as client:
        r = client.get("/v1/sessions/main/calls")
        assert r.status_code == 501 and "no session store" in r.json()["error"]


def _running_with_output(served: Served, lane: str, call_id: str, text: str) -> bool:
    def probe() -> bool:
        tool = served.lanes.host(lane).view["tools"].get(call_id)
        out = tool and tool["output"]
        return bool(out and text in out["content"][0]["text"])

    return bool(served.server.call(probe))


def _wait_for(probe: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    """Poll ``probe`` until it returns something truthy (a condition with a deadline,
    not a sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = probe()
        if got:
            return got
        time.sleep(0.02)  # polling interval, not synchronisation: the condition decides
    raise AssertionError(f"timed out waiting for {what}")
