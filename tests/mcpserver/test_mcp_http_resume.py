"""``toolfold mcp --http``: a client whose event stream broke resumes it with
``Last-Event-ID`` and gets what it missed (the SDK's transport answered that GET with
an HTTP 500 when no event store was configured)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import mcp_types as types
from mcp_helpers import HTTP_TOKEN, http_server

from toolfold.mcp._events import EventLog

HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Authorization": f"Bearer {HTTP_TOKEN}",
}
VERSION = "2025-11-25"  # the first revision with priming events


def sse_events(lines: Iterator[str]) -> Iterator[dict[str, str]]:
    """The events of an SSE body, each a dict of its fields."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        field, _, value = line.partition(":")
        event[field] = value.removeprefix(" ")


def open_session(http: httpx.Client, url: str) -> dict[str, str]:
    """Initialize a session; the headers every later request of it carries."""
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    reply = http.post(url, json=init, headers=HEADERS)
    assert reply.status_code == 200, reply.text
    headers = HEADERS | {
        "Mcp-Session-Id": reply.headers["mcp-session-id"],
        "Mcp-Protocol-Version": VERSION,
    }
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert http.post(url, json=done, headers=headers).status_code == 202
    return headers


def test_a_broken_stream_resumes_with_last_event_id_and_gets_what_it_missed(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "go"
    command = f"echo first; while [ ! -e {gate} ]; do sleep 0.05; done; echo second"
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "bash",
            "arguments": {"command": command},
            "_meta": {"progressToken": "p1"},
        },
    }
    with http_server(tmp_path) as (url, _), httpx.Client(timeout=60) as http:
        headers = open_session(http, url)
        seen: list[dict[str, str]] = []
        with http.stream("POST", url, json=call, headers=headers) as stream:
            assert stream.status_code == 200
            for event in sse_events(stream.iter_lines()):
                seen.append(event)
                if "progress" in event.get("data", ""):
                    break  # the connection drops with the call still running
        priming, progress = seen[0], seen[-1]
        assert priming["id"] and priming["data"] == "" and priming["retry"] == "1000"
        assert "first" in json.loads(progress["data"])["params"]["message"]
        gate.touch()
        # Resume after the priming event: the progress already seen comes again,
        # then the result, which was sent while no connection was open.
        replayed: list[dict[str, str]] = []
        resume = headers | {"Last-Event-ID": priming["id"]}
        with http.stream("GET", url, headers=resume) as stream:
            assert stream.status_code == 200, stream.read()
            for event in sse_events(stream.iter_lines()):
                replayed.append(event)
                if '"result"' in event.get("data", ""):
                    break
        messages = [json.loads(e["data"]) for e in replayed if e.get("data")]
        assert messages[0] == json.loads(progress["data"])
        result = messages[-1]
        assert result["id"] == 7
        assert result["result"]["content"][0]["text"] == "first\nsecond\n"
        ids = [int(e["id"]) for e in replayed if e.get("id")]
        assert ids == sorted(ids) and ids[0] > int(priming["id"])

        # An event id of another session replays nothing of this one.
        other = open_session(http, url)
        with http.stream("GET", url, headers=other | {"Last-Event-ID": priming["id"]}) as stream:
            assert stream.status_code == 200
            assert [e for e in sse_events(stream.iter_lines()) if e.get("data")] == []


def test_the_event_log_is_bounded_and_per_session() -> None:
    log = EventLog(max_events=5, max_bytes=10_000)
    one, two = log.view(), log.view()

    def note(i: int) -> types.JSONRPCNotification:
        return types.JSONRPCNotification(jsonrpc="2.0", method="n", params={"i": i})

    async def fill() -> list[str]:
        return [await (one if i % 2 else two).store_event("0", note(i)) for i in range(20)]

    ids = asyncio.run(fill())
    assert log.size[0] == 5
    sent: list[int] = []

    async def collect(event: object) -> None:
        sent.append(event.message.params["i"])  # type: ignore[attr-defined]

    # The oldest events went for room: resuming from one of them replays nothing.
    assert asyncio.run(one.replay_events_after(ids[1], collect)) is None
    assert asyncio.run(one.replay_events_after(ids[15], collect)) == "0"
    assert sent == [17, 19]  # session one's events only
    assert asyncio.run(two.replay_events_after(ids[15], collect)) is None
    assert asyncio.run(two.replay_events_after("not-a-number", collect)) is None

    big = EventLog(max_events=100, max_bytes=200)
    view = big.view()
    for i in range(50):
        asyncio.run(view.store_event("s", note(i)))
    events, size = big.size
    assert size <= 200 and 0 < events < 50
