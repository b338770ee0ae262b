"""OpenTelemetry metrics of replication (docs/observability.md): live lanes and their
subscribers, and how long a follower takes to bring a stored session's change into its
lane."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from otel_fixture import points
from toolfold.harness._lane import Lanes
from toolfold.storage import append_entry, open_repository


def value(reader: InMemoryMetricReader, name: str) -> int:
    [point] = points(reader, name)
    return int(point.value)


def test_lanes_and_subscribers_are_counted_while_they_live(
    metrics: InMemoryMetricReader,
) -> None:
    gc.collect()  # lanes of earlier tests that are already unreachable
    lanes = Lanes()  # as toolfold serve makes its lanes at start-up
    lanes_before = value(metrics, "toolfold.lane.count")
    subs_before = value(metrics, "toolfold.lane.subscriber.count")
    one, two = lanes.host("a").subscribe(), lanes.host("a").subscribe()
    lanes.host("b")
    assert value(metrics, "toolfold.lane.count") == lanes_before + 2
    assert value(metrics, "toolfold.lane.subscriber.count") == subs_before + 2
    one.close()
    assert value(metrics, "toolfold.lane.subscriber.count") == subs_before + 1
    two.close()
    assert lanes.discard("a") and lanes.discard("b")
    assert value(metrics, "toolfold.lane.count") == lanes_before
    assert value(metrics, "toolfold.lane.subscriber.count") == subs_before


async def test_a_follower_records_its_lag_after_each_change_signal(
    metrics: InMemoryMetricReader, tmp_path: Path
) -> None:
    from toolfold.server._follow import Followers
    from toolfold.server._sessions import SessionPool

    url = f"sqlite:{tmp_path / 'toolfold.db'}"
    writer_repo, reader_repo = open_repository(url), open_repository(url)
    lanes = Lanes()
    # No backstop read and no idle stop within the test: every read is a wake-up.
    followers = Followers(SessionPool(reader_repo), lanes, safety_poll=3600, idle=3600)

    def lag_count() -> int:
        return sum(p.count for p in points(metrics, "toolfold.follower.lag"))

    async def until(what: str, ok: Callable[[], bool]) -> None:
        for _ in range(3000):
            if ok():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never {what}")

    try:
        followed = await writer_repo.create_session("s")
        watcher = lanes.host("s").subscribe()
        followers.ensure("s")
        # Until the follower has read the session and waits for its next change: a
        # commit before it opened the session would be part of that first read.
        await until("the first read", lambda: reader_repo._waiters.lowest("s") is not None)
        # The first read is not a change: nothing recorded.
        assert lag_count() == 0
        for n in range(2):
            await followed.commit([append_entry(n)])
            await until(f"a lag for change {n}", lambda n=n: lag_count() == n + 1)  # type: ignore[misc]
        [point] = points(metrics, "toolfold.follower.lag")
        assert point.min >= 0
        watcher.close()
    finally:
        await followers.aclose()
        await writer_repo.close()
        await reader_repo.close()


def test_a_served_lanes_sse_subscriber_is_counted_until_it_disconnects(
    metrics: InMemoryMetricReader, serve: Callable[[Any], Any]
) -> None:
    from lane_fixtures import SSEReplica

    from toolfold.server import create_app

    gc.collect()
    lanes = Lanes(default_lane="main")
    # A short keep-alive: the server finds a gone client at its next write.
    server = serve(create_app(lanes=lanes, keepalive=0.05))
    server.call(lambda: lanes.host("main"))
    lanes_before = value(metrics, "toolfold.lane.count")
    subs_before = value(metrics, "toolfold.lane.subscriber.count")
    replica = SSEReplica(server.client(), "/v1/lanes/main/state")
    replica.step()  # the base batch: the server holds the subscription
    assert value(metrics, "toolfold.lane.subscriber.count") == subs_before + 1
    assert value(metrics, "toolfold.lane.count") == lanes_before
    replica.close()
    # The server notices the disconnect on its own loop: wait for the count to drop.
    for _ in range(1000):
        if value(metrics, "toolfold.lane.subscriber.count") == subs_before:
            break
        time.sleep(0.01)
    assert value(metrics, "toolfold.lane.subscriber.count") == subs_before
