"""SSE subscriptions over a real uvicorn on loopback: convergence, own bases, resubscribe, bounds."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from typing import Any

import httpx
import pytest
from lane_fixtures import SSEReplica, tail_stream

from toolfold.chord import is_base
from toolfold.harness._lane import Lanes
from toolfold.harness.events import HarnessEvent
from toolfold.server import create_app


def _inject(server: Any, lanes: Lanes, events: Iterable[HarnessEvent], chunk: int = 50) -> None:
    batch: list[HarnessEvent] = []
    for event in events:
        batch.append(event)
        if len(batch) >= chunk:
            server.call(lambda b=batch: [lanes.handle(e) for e in b])
            batch = []
    if batch:
        server.call(lambda b=batch: [lanes.handle(e) for e in b])


def _view(server: Any, lanes: Lanes, lane: str = "main") -> Any:
    return server.call(lambda: copy.deepcopy(lanes.host(lane).view))


@pytest.fixture
def setup(serve: Callable[[Any], Any]) -> Any:
    def _setup(
        run_command: Any = None, repository: Any = None, **host_options: Any
    ) -> tuple[Any, Lanes, httpx.Client]:
        lanes = Lanes(default_lane="main", **host_options)
        server = serve(create_app(lanes=lanes, run_command=run_command, repository=repository))
        return server, lanes, server.client()

    return _setup


def test_long_truncating_stream_replica_equals_server_view(setup: Any) -> None:
    server, lanes, client = setup(buffer_batches=100_000)
    server.call(lambda: lanes.host("main"))
    replica = SSEReplica(client, "/v1/lanes/main/state")
    first_id, first = replica.step()
    assert first_id == 0 and is_base(first)
    _inject(server, lanes, tail_stream("t1", lines=3000, window=200))
    expected = _view(server, lanes)
    replica.fold_until(expected)
    assert replica.value == expected
    text = expected["tools"]["t1"]["output"]["content"][0]["text"]
    assert text.count("\n") == 200 and "😀" in text and "漢字" in text
    assert expected["tools"]["t1"]["output"]["truncation"]["total_lines"] == 3000
    # One base, then only deltas; nothing needed a resubscribe.
    assert replica.bases == 1 and replica.subscriptions == 1
    assert replica.batches > 400
    replica.close()


def test_second_subscriber_mid_stream_gets_its_own_base(setup: Any) -> None:
    server, lanes, client = setup(buffer_batches=100_000)
    events = list(tail_stream("t1", lines=1200, window=100))
    half = len(events) // 2
    a = SSEReplica(client, "/v1/lanes/main/state")
    a.step()
    _inject(server, lanes, events[:half])
    mid = _view(server, lanes)
    a.fold_until(mid)
    b = SSEReplica(client, "/v1/lanes/main/state")
    b_id, b_first = b.step()
    # B's stream starts at id 0 with a base of the view as it is now.
    assert b_id == 0 and is_base(b_first)
    assert b.value == mid
    _inject(server, lanes, events[half:])
    final = _view(server, lanes)
    a.fold_until(final)
    b.fold_until(final)
    assert a.value == b.value == final
    assert a.subscriptions == b.subscriptions == 1
    a.close()
    b.close()


def test_consumer_that_misses_a_batch_resubscribes_and_converges(setup: Any) -> None:
    server, lanes, client = setup(buffer_batches=100_000)
    replica = SSEReplica(client, "/v1/lanes/main/state")
    replica.step()
    events = list(tail_stream("t1", lines=600, window=50))
    _inject(server, lanes, events[:40])
    replica.fold_until(_view(server, lanes))
    replica.skip_next = 1  # a batch lost in transit: the next id seen is a gap
    _inject(server, lanes, events[40:])
    final = _view(server, lanes)
    replica.fold_until(final)
    assert replica.value == final
    assert replica.subscriptions == 2
    assert replica.resubscribe_reasons and replica.resubscribe_reasons[0].startswith("gap")
    replica.close()


def test_slow_consumer_does_not_grow_server_memory_past_the_bound(setup: Any) -> None:
    bound_batches, bound_bytes = 16, 64 * 1024
    server, lanes, client = setup(buffer_batches=bound_batches, buffer_bytes=bound_bytes)
    host = server.call(lambda: lanes.host("main"))
    replica = SSEReplica(client, "/v1/lanes/main/state")
    replica.step()  # subscribed; now stop reading while a lot is published
    peak_batches = peak_bytes = 0
    published = 0
    # ~20 MB of output: far more than the socket buffers and the subscriber bound.
    events = list(tail_stream("t1", lines=60_000, window=400, per_update=40))
    for start in range(0, len(events), 50):
        chunk = events[start : start + 50]
        server.call(lambda c=chunk: [lanes.handle(e) for e in c])
        backlogs = server.call(host.backlogs)
        published = server.call(lambda: host.published)
        for n, size in backlogs:
            peak_batches = max(peak_batches, n)
            peak_bytes = max(peak_bytes, size)
    assert published > 1000
    assert peak_batches <= bound_batches + 1
    # A single batch may exceed the byte bound once (the one that overflows it); a
    # base alone may be as large as the view.
    assert peak_bytes <= bound_bytes + 64 * 1024, peak_bytes
    resyncs = server.call(lambda: sum(s.resyncs for s in host._subscribers))
    assert resyncs >= 1, "the consumer never overflowed: the test did not exercise the bound"
    # The slow consumer still converges: its backlog was replaced by a fresh base.
    final = _view(server, lanes)
    replica.fold_until(final)
    assert replica.value == final
    assert replica.subscriptions == 1 and replica.bases >= 2
    replica.close()


def test_json_api_lists_lanes_and_sessions_and_validates_commands(setup: Any) -> None:
    class Store:
        async def list_sessions(self) -> list[str]:
            return ["b", "a"]

    started: list[tuple[str, str]] = []

    async def runner(lane: str, command: str) -> str:
        started.append((lane, command))
        return "call-1"

    server, lanes, client = setup(run_command=runner, repository=Store())
    with client:
        _inject(server, lanes, tail_stream("t1", lines=10, window=5))
        lanes_body = client.get("/v1/lanes").json()
        assert lanes_body["lanes"][0]["lane"] == "main"
        assert lanes_body["lanes"][0]["tools"] == 1
        assert client.get("/v1/sessions").json() == {"sessions": ["a", "b"]}
        r = client.post("/v1/lanes/main/commands", json={"command": "echo hi"})
        assert r.status_code == 202 and r.json() == {"lane": "main", "tool_call_id": "call-1"}
        assert started == [("main", "echo hi")]
        bad = client.post("/v1/lanes/main/commands", json={"command": ""})
        assert (
            bad.status_code == 400 and '"command" must be a non-empty string' in bad.json()["error"]
        )
        notjson = client.post(
            "/v1/lanes/main/commands",
            content=b"{nope",
            headers={"Content-Type": "application/json"},
        )
        assert notjson.status_code == 400 and "not JSON" in notjson.json()["error"]
        badlane = client.get("/v1/lanes/bad%20lane/state")
        assert badlane.status_code == 404 and "'bad lane' is not allowed" in badlane.json()["error"]
        assert started == [("main", "echo hi")]  # refused requests started nothing
        page = client.get("/")
        assert page.status_code == 200 and "chord.js" in page.text
        assert "class Decoder" in client.get("/static/chord.js").text


def test_commands_without_a_runner_answer_501(setup: Any) -> None:
    _server, _lanes, client = setup()
    r = client.post("/v1/lanes/main/commands", json={"command": "ls"})
    assert r.status_code == 501 and "no command runner" in r.json()["error"]


def test_shutdown_ends_open_subscriptions(setup: Any) -> None:
    server, _lanes, client = setup()
    replica = SSEReplica(client, "/v1/lanes/main/state")
    replica.step()
    server.stop()  # ends the streams, then uvicorn exits; must not hang
    with pytest.raises(AssertionError, match="the SSE stream ended"):
        replica.step()
    replica.close()
    # The fixture stops it again at teardown: make that a no-op.
    server.stop = lambda: None
    assert json.dumps(replica.value)  # the replica still holds a plain JSON value


def test_idle_streams_send_keepalive_comments(serve: Callable[[Any], Any]) -> None:
    lanes = Lanes(default_lane="main")
    server = serve(create_app(lanes=lanes, keepalive=0.05))
    with (
        server.client() as client,
        client.stream("GET", "/v1/lanes/main/state") as response,
    ):
        lines = response.iter_lines()
        seen: list[str] = []
        for line in lines:
            seen.append(line)
            if line == ": keepalive":
                break
        assert seen[0] == ": toolfold lane main"
        assert any(line.startswith("id: 0") for line in seen)
        # The stream is still live after a keepalive: a published batch arrives as id 1.
        server.call(lambda: lanes.handle(next(iter(tail_stream("t1", lines=1)))))
        for line in lines:
            if line.startswith("id:"):
                assert line == "id: 1"
                break


def test_sessions_come_from_a_store_url(serve: Callable[[Any], Any], tmp_path: Any) -> None:
    import asyncio

    from toolfold.storage import open_repository

    async def make() -> None:
        repo = open_repository(f"jsonl:{tmp_path}")
        for name in ("beta", "alpha"):
            session = await repo.create_session(name)
            await session.close()
        await repo.close()

    asyncio.run(make())
    server = serve(create_app(repository=f"jsonl:{tmp_path}"))
    with server.client() as client:
        assert client.get("/v1/sessions").json() == {"sessions": ["alpha", "beta"]}


def test_shutdown_cancels_running_commands_and_leaves_no_tasks(
    serve: Callable[[Any], Any],
) -> None:
    from toolfold.server import HarnessCommands

    lanes = Lanes(default_lane="main")
    commands = HarnessCommands(lanes)
    server = serve(create_app(lanes=lanes, run_command=commands))
    with server.client() as client:
        replica = SSEReplica(client, "/v1/lanes/main/state")
        replica.step()
        # A command that would run for a long time on its own.
        r = client.post("/v1/lanes/main/commands", json={"command": "echo started; sleep 600"})
        assert r.status_code == 202
        call_id = r.json()["tool_call_id"]
        while True:  # fold until the call is visibly running with its first line
            replica.step()
            tool = (replica.value or {}).get("tools", {}).get(call_id)
            if tool and tool["output"] and "started" in tool["output"]["content"][0]["text"]:
                break
        assert server.call(lambda: commands.running) == 1
        server.stop()
        replica.close()
    assert not server.thread.is_alive()
    assert commands.running == 0
    server.stop = lambda: None  # already stopped; the fixture's teardown is a no-op
