"""EventBus: ordered fan-out, bounded subscribers that are dropped loudly, safe listeners."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.harness import (
    BusClosedError,
    EventBus,
    HarnessEvent,
    RunEnd,
    RunStart,
    SubscriberOverflowError,
)


async def test_every_subscriber_gets_every_event_in_order() -> None:
    bus = EventBus()
    a, b = bus.subscribe(), bus.subscribe()
    for i in range(5):
        bus.publish(RunStart(f"r{i}"))
    bus.close()
    got_a = [e async for e in a]
    got_b = [e async for e in b]
    assert got_a == got_b == [RunStart(f"r{i}") for i in range(5)]


async def test_a_slow_subscriber_is_dropped_with_an_error_not_silently() -> None:
    bus = EventBus(max_queue=3)
    slow = bus.subscribe()
    fast = bus.subscribe(max_queue=100)
    for i in range(5):
        bus.publish(RunStart(f"r{i}"))  # never blocks, whatever the subscribers do
    received = []
    with pytest.raises(SubscriberOverflowError) as info:
        async for e in slow:
            received.append(e)
    assert received == [RunStart("r0"), RunStart("r1"), RunStart("r2")]  # queued ones first
    assert "fell 3 events behind (max_queue=3)" in str(info.value)
    assert "resubscribe" in str(info.value)
    assert slow.dropped and not fast.dropped
    bus.close()
    assert len([e async for e in fast]) == 5


async def test_a_raising_listener_is_detached_and_others_still_run() -> None:
    bus = EventBus()
    seen: list[HarnessEvent] = []

    def bad(event: HarnessEvent) -> None:
        raise RuntimeError("reducer bug")

    bus.add_listener(bad)
    bus.add_listener(seen.append)
    bus.publish(RunStart("r"))
    bus.publish(RunEnd("r"))
    assert seen == [RunStart("r"), RunEnd("r")]
    assert [str(e) for e in bus.listener_errors] == ["reducer bug"]


async def test_publishing_on_a_closed_bus_raises() -> None:
    bus = EventBus()
    bus.close()
    with pytest.raises(BusClosedError, match=r"publish\(run_start\) on a closed EventBus"):
        bus.publish(RunStart("r"))
    assert [e async for e in bus.subscribe()] == []


async def test_unsubscribe_by_close_ends_iteration_after_queued_events() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    bus.publish(RunStart("r"))
    sub.close()
    bus.publish(RunEnd("r"))
    assert [e async for e in sub] == [RunStart("r")]


async def test_an_event_published_from_a_listener_keeps_one_order_for_everyone() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    seen: list[HarnessEvent] = []

    def reacts(event: HarnessEvent) -> None:
        if isinstance(event, RunStart):
            bus.publish(RunEnd(event.run_id))

    bus.add_listener(reacts)
    bus.add_listener(seen.append)
    bus.publish(RunStart("r"))
    bus.close()
    assert seen == [RunStart("r"), RunEnd("r")]
    assert [e async for e in sub] == [RunStart("r"), RunEnd("r")]


@settings(max_examples=300)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["publish", "drain"]), st.integers(0, 2)), max_size=60
    ),
    max_queue=st.integers(1, 6),
)
def test_subscribers_get_the_published_order_or_an_explicit_drop(
    steps: list[tuple[str, int]], max_queue: int
) -> None:
    async def main() -> None:
        bus = EventBus(max_queue=max_queue)
        subs = [bus.subscribe() for _ in range(3)]
        published: list[HarnessEvent] = []
        received: list[list[HarnessEvent]] = [[], [], []]
        backlog = [0, 0, 0]
        dropped = [False, False, False]

        async def drain(i: int) -> None:
            # Take what is queued without waiting for more (close-free drain).
            while subs[i]._queue:
                received[i].append(await subs[i].__anext__())
            backlog[i] = 0

        for kind, i in steps:
            if kind == "publish":
                event = RunStart(f"r{len(published)}")
                bus.publish(event)
                published.append(event)
                for j in range(3):
                    if not dropped[j]:
                        if backlog[j] >= max_queue:
                            dropped[j] = True
                        else:
                            backlog[j] += 1
            else:
                await drain(i)
        bus.close()
        for i, sub in enumerate(subs):
            try:
                async for e in sub:
                    received[i].append(e)
                overflowed = False
            except SubscriberOverflowError:
                overflowed = True
            assert overflowed == dropped[i] == sub.dropped
            # Never reordered, never a gap: a prefix of what was published (all of it
            # unless the subscriber was dropped, loudly).
            assert received[i] == published[: len(received[i])]
            if not overflowed:
                assert received[i] == published

    asyncio.run(main())
