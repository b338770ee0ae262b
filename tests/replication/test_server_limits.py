"""The server's request limits at their exact values, over a real uvicorn.

Each limit is tested on both sides of its boundary with the number written out
(64 KiB commands, 256 lanes, ``?limit=`` up to 1000, a 394,240-byte body), not read
from the constant, so raising a limit fails a test. Also: a GET never creates a
lane, and at the lane limit an idle lane makes room for a new one.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from toolfold.harness import Lanes
from toolfold.harness.events import RunEnd, RunStart
from toolfold.server import create_app
from toolfold.storage import MemoryRepository

JSON = {"Content-Type": "application/json"}


@pytest.fixture
def app_with_runner(serve: Callable[..., Any]) -> tuple[Any, Lanes, list[tuple[str, str]]]:
    started: list[tuple[str, str]] = []

    async def runner(lane: str, command: str) -> str:
        started.append((lane, command))
        return f"call-{len(started)}"

    lanes = Lanes()
    server = serve(create_app(lanes=lanes, run_command=runner))
    return server, lanes, started


def _post(client: httpx.Client, lane: str, command: str) -> httpx.Response:
    return client.post(f"/v1/lanes/{lane}/commands", json={"command": command})


def test_a_command_of_64_kib_runs_and_one_byte_more_is_refused(app_with_runner: Any) -> None:
    server, _lanes, started = app_with_runner
    with server.client() as client:
        at_limit = ": " + "x" * (65536 - 2)
        assert _post(client, "main", at_limit).status_code == 202
        r = _post(client, "main", at_limit + "x")
        assert r.status_code == 413
        assert r.json() == {"error": "command is longer than 65536 bytes; shorten it"}
        # Counted in UTF-8 bytes, not characters.
        assert _post(client, "main", "é" * 32768).status_code == 202
        assert _post(client, "main", "é" * 32768 + "x").status_code == 413
        # A command at the limit still fits the body limit with every byte escaped.
        escaped = _post(client, "main", "\x01" * 65536)
        assert escaped.status_code == 202, escaped.text
    assert [len(c.encode()) for _lane, c in started] == [65536, 65536, 65536]


def test_the_body_limit_is_394240_bytes(app_with_runner: Any) -> None:
    server, _lanes, started = app_with_runner
    envelope = b'{"command": ""}'
    with server.client() as client:
        body = envelope[:-2] + b"x" * (394240 - len(envelope)) + b'"}'
        assert len(body) == 394240
        # Through the guard; then refused by the command's own limit.
        r = client.post("/v1/lanes/main/commands", content=body, headers=JSON)
        assert r.status_code == 413 and r.json()["error"].startswith("command is longer")
    # One byte more is refused from Content-Length alone (the body is never sent:
    # the server answers and closes, so a client still sending would see a reset).
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            (
                f"POST /v1/lanes/main/commands HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
                "Content-Length: 394241\r\n\r\n"
            ).encode()
        )
        answer = b""
        for _ in range(100):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and b"connection: close" in head
    assert json.loads(payload) == {
        "error": "the request body is 394241 bytes; this server accepts at most 394240"
    }
    assert started == []


def test_limit_is_at_most_1000(serve: Callable[..., Any]) -> None:
    repo = MemoryRepository()

    async def make() -> None:
        await (await repo.create_session("main")).close()

    asyncio.run(make())
    server = serve(create_app(repository=repo))
    with server.client() as client:
        r = client.get("/v1/sessions/main/calls", params={"limit": "1000"})
        assert r.status_code == 200 and r.json() == {"session": "main", "total": 0, "calls": []}
        r = client.get("/v1/sessions/main/calls", params={"limit": "1001"})
        assert r.status_code == 400
        assert r.json() == {
            "error": "limit must be an integer from 1 to 1000, got '1001' (the default is 100)"
        }
        # 5,000 digits: past Python's int-conversion limit, once a 500 with a traceback.
        r = client.get("/v1/sessions/main/calls", params={"limit": "9" * 5000})
        assert r.status_code == 400
        assert r.json() == {
            "error": "limit must be an integer from 1 to 1000, got '99999999999999999999... "
            "(5,000 characters)' (the default is 100)"
        }
        r = client.get("/v1/sessions/main/calls", params={"limit": "\u0661"})  # Arabic-Indic 1
        assert r.status_code == 400


def _busy(server: Any, lanes: Lanes, names: list[str]) -> None:
    """Lanes with an operation running (their run never ends in this test)."""
    server.call(lambda: [lanes.handle(RunStart(f"run-{n}", lane=n)) for n in names])


def _names(client: httpx.Client) -> list[str]:
    return [lane["lane"] for lane in client.get("/v1/lanes").json()["lanes"]]


def test_256_busy_lanes_are_held_and_a_257th_is_refused(app_with_runner: Any) -> None:
    server, lanes, started = app_with_runner
    _busy(server, lanes, [f"busy{i}" for i in range(255)])
    with server.client() as client:
        # The 256th lane: created by its command.
        assert _post(client, "new256", "true").status_code == 202
        _busy(server, lanes, ["new256"])
        assert len(_names(client)) == 256
        r = _post(client, "new257", "true")
        assert r.status_code == 503
        assert r.json() == {
            "error": "lane 'new257' does not exist and all 256 lanes of this server are busy "
            "(a call running or a viewer subscribed); use an existing lane (GET /v1/lanes) "
            "or retry once one is idle"
        }
        # An existing lane still takes commands.
        assert _post(client, "busy0", "true").status_code == 202
        assert started == [("new256", "true"), ("busy0", "true")]
        assert "new257" not in _names(client)


def test_at_the_limit_an_idle_lane_makes_room(app_with_runner: Any) -> None:
    server, lanes, _started = app_with_runner
    _busy(server, lanes, [f"busy{i}" for i in range(254)])
    # One lane whose run ended (idle), one with a viewer subscribed (busy).
    server.call(lambda: [lanes.handle(RunStart("done", lane="done")), lanes.handle(RunEnd("done"))])
    server.call(lambda: lanes.host("watched"))
    with server.client() as client, client.stream("GET", "/v1/lanes/watched/state") as sse:
        lines = sse.iter_lines()  # held: dropping the iterator would close the stream
        assert next(lines) == ": toolfold lane watched"
        assert len(_names(client)) == 256
        assert _post(client, "fresh", "true").status_code == 202
        names = _names(client)
        assert len(names) == 256 and "done" not in names
        assert "watched" in names and "fresh" in names
        # Once "fresh" is running too, nothing is idle: a new lane is refused.
        _busy(server, lanes, ["fresh"])
        assert _post(client, "another", "true").status_code == 503
        assert server.call(lambda: lanes.host("watched").subscribers) == 1


def test_a_get_never_creates_a_lane(app_with_runner: Any) -> None:
    server, _lanes, _started = app_with_runner
    with server.client() as client:
        for i in range(300):
            r = client.get(f"/v1/lanes/probe{i}/state")
            assert r.status_code == 404
        assert r.json()["error"].startswith("no lane or stored session named 'probe299'")
        assert _names(client) == []
        # The default lane can be watched before anything ran in it; once its viewer
        # leaves, the lane holds no call and is not kept.
        with client.stream("GET", "/v1/lanes/default/state") as sse:
            lines = sse.iter_lines()
            assert next(lines) == ": toolfold lane default"
            assert _names(client) == ["default"]
        for _ in range(500):  # the server notices the disconnect
            if _names(client) == []:
                break
        assert _names(client) == []
        # The lane limit is untouched: a command still creates its lane.
        assert _post(client, "real", "true").status_code == 202
        assert _names(client) == ["real"]


def test_a_refused_command_leaves_no_lane(serve: Callable[..., Any]) -> None:
    from toolfold.server import CommandRejectedError

    async def refuse(lane: str, command: str) -> str:
        raise CommandRejectedError(f"not in lane {lane!r}", status=403)

    lanes = Lanes()
    server = serve(create_app(lanes=lanes, run_command=refuse))
    with server.client() as client:
        r = _post(client, "nope", "true")
        assert r.status_code == 403 and r.json() == {"error": "not in lane 'nope'"}
        assert _names(client) == []
        assert json.loads(client.get("/v1/lanes").text) == {"lanes": []}
