"""Adaptive publisher on a fake clock: the workload rows of the spec, errors and finalisation."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from execenv_helpers import FakeClock

from toolfold.execenv import (
    AdaptivePublisher,
    Append,
    CallbackError,
    CaptureOptions,
    CaptureSession,
    ExecConfigError,
    Metadata,
    Replace,
    ShellOutputLimits,
    ShellOutputUpdate,
    ShellOutputView,
    Slide,
    apply_shell_output_update,
    update_cost,
)

CAP = 50 * 1024


class Recorder:
    """Consumer that records (time, update) and folds as it goes."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.items: list[tuple[float, ShellOutputUpdate]] = []
        self.view: ShellOutputView | None = None

    def __call__(self, update: ShellOutputUpdate) -> None:
        self.items.append((self.clock.now(), update))
        self.view = apply_shell_output_update(self.view, update)

    @property
    def times(self) -> list[float]:
        return [t for t, _ in self.items]

    def kinds(self) -> list[str]:
        return [type(u).__name__ for _, u in self.items]


def make_session(clock: FakeClock, rec: Recorder, **limits: object) -> CaptureSession:
    return CaptureSession(
        CaptureOptions(limits=ShellOutputLimits(**limits), spill=False),  # type: ignore[arg-type]
        on_update=rec,
        clock=clock,
    )


def numbered(start: int, count: int, width: int = 60) -> bytes:
    return b"".join(
        f"{i:010d} ".ljust(width - 1, "x").encode() + b"\n" for i in range(start, start + count)
    )


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


async def test_within_cap_small_appends_at_most_every_100ms() -> None:
    clock, rec = FakeClock(), None
    rec = Recorder(clock)
    session = make_session(clock, rec)
    for i in range(100):  # 100 short lines over one second
        session.feed(f"line {i}\n".encode())
        clock.advance(0.01)
    final = await session.finish()
    kinds = rec.kinds()
    assert kinds[0] == "Replace" and set(kinds[1:]) == {"Append"}
    assert all(g >= 0.1 - 1e-9 for g in gaps(rec.times[:-1]))
    assert 9 <= len(rec.items) <= 12
    assert rec.view == final and final.text.count("\n") == 100


async def test_slow_trickle_publishes_every_write_immediately() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = make_session(clock, rec)
    for i in range(10):  # one line every 300 ms: always idle, always the leading edge
        session.feed(f"tick {i}\n".encode())
        assert rec.times[-1] == clock.now() and len(rec.items) == i + 1
        clock.advance(0.3)
    assert clock.pending() == 0
    final = await session.finish()
    assert len(rec.items) == 10  # nothing left for the final publication
    assert rec.kinds() == ["Replace"] + ["Append"] * 9
    assert rec.view == final


async def test_full_speed_past_cap_settles_near_two_bounded_replaces_per_second() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = make_session(clock, rec)
    line = 0
    for _ in range(400):  # 4 s of 64 KB every 10 ms: far above the 100 KiB/s target
        session.feed(numbered(line, 1092))
        line += 1092
        clock.advance(0.01)
    final = await session.finish()
    steady = [(t, u) for t, u in rec.items if 1.0 <= t < 4.0]
    assert 5 <= len(steady) <= 7  # about 2 per second
    assert all(isinstance(u, Replace) for _, u in steady)
    assert all(len(u.output.text.encode()) <= CAP for _, u in steady)  # type: ignore[union-attr]
    assert all(g >= 0.49 for g in gaps(rec.times[:-1]))
    # Sustained rate: bytes published per second between the first and last steady update.
    rate = sum(update_cost(u) for _, u in steady[:-1]) / (steady[-1][0] - steady[0][0])
    assert 90 * 1024 <= rate <= 100 * 1024 * 1.01
    assert rec.view == final


async def test_trickle_past_cap_publishes_small_slides_every_100ms() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = make_session(clock, rec)
    session.feed(numbered(0, 1000))  # 60 KB: past the cap at once
    clock.advance(1.0)
    start = len(rec.items)
    for i in range(1000, 1150):  # one line per 20 ms for 3 s
        session.feed(numbered(i, 1))
        clock.advance(0.02)
    final = await session.finish()
    trickle = rec.items[start:]
    assert 25 <= len(trickle) <= 32
    assert all(isinstance(u, Slide) for _, u in trickle)
    assert all(len(u.text) <= 6 * 60 for _, u in trickle)  # type: ignore[union-attr]
    assert all(g >= 0.1 - 1e-9 for g in gaps([t for t, _ in trickle][:-1]))
    assert rec.view == final


async def test_burst_then_silence_one_trailing_timer_publishes_the_last_state() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = make_session(clock, rec)
    for i in range(50):  # a burst inside one min_interval
        session.feed(f"burst {i}\n".encode())
        clock.advance(0.001)
    assert len(rec.items) == 1  # the leading edge only
    assert clock.pending() == 1  # exactly one trailing timer, no polling timer
    clock.advance(0.2)
    assert len(rec.items) == 2 and clock.pending() == 0
    assert rec.view is not None and rec.view.text.endswith("burst 49\n")
    clock.advance(5.0)
    assert len(rec.items) == 2  # silence publishes nothing
    final = await session.finish()
    assert len(rec.items) == 2  # nothing new: the final state was already published
    assert rec.view == final


async def test_finalisation_bypasses_the_deadline_and_cancels_the_timer() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = make_session(clock, rec)
    session.feed(b"first\n")
    clock.advance(0.01)
    session.feed(b"second\n")  # deadline at 0.1: a trailing timer is armed
    assert clock.pending() == 1
    final = await session.finish()  # e.g. timeout or abort at t=0.01
    assert rec.times == [0.0, 0.01]
    assert rec.kinds() == ["Replace", "Append"]
    assert clock.pending() == 0
    clock.advance(1.0)
    assert len(rec.items) == 2
    assert rec.view == final and final.text == "first\nsecond\n"


async def test_head_mode_keeps_publishing_counters_once_capped() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = make_session(clock, rec, retain="head", max_bytes=100)
    session.feed(numbered(0, 10))
    clock.advance(0.2)
    session.feed(numbered(10, 10))
    clock.advance(0.2)
    final = await session.finish()
    assert rec.kinds() == ["Replace", "Metadata"]
    assert final.metadata.truncation.total_lines == 20
    assert rec.view == final


async def test_consumer_error_is_recorded_once_and_never_redelivered() -> None:
    clock = FakeClock()
    calls: list[ShellOutputUpdate] = []
    errors: list[BaseException] = []

    def consume(update: ShellOutputUpdate) -> None:
        calls.append(update)
        if len(calls) == 2:
            raise RuntimeError("renderer gone")

    session = CaptureSession(
        CaptureOptions(spill=False), on_update=consume, clock=clock, on_failure=errors.append
    )
    session.feed(b"a\n")
    clock.advance(0.2)
    session.feed(b"b\n")  # second publication raises
    clock.advance(0.2)
    session.feed(b"c\n")
    clock.advance(0.2)
    await session.finish()
    assert len(calls) == 2  # the failed delta is not re-emitted, nothing after it
    assert isinstance(session.failure, CallbackError) and errors == [session.failure]
    assert "RuntimeError: renderer gone" in str(session.failure)
    assert isinstance(session.failure.__cause__, RuntimeError)


async def test_publisher_finish_raises_callback_error_from_consumer() -> None:
    clock = FakeClock()
    state = {"n": 0}

    def produce() -> tuple[int, int] | None:
        state["n"] += 1
        return state["n"], 10

    def consume(payload: int) -> None:
        raise ValueError(f"bad payload {payload}")

    pub: AdaptivePublisher[int] = AdaptivePublisher(produce=produce, consume=consume, clock=clock)
    pub.mark_dirty()
    assert isinstance(pub.callback_error, ValueError)
    pub.mark_dirty()
    with pytest.raises(CallbackError, match="ValueError: bad payload 1") as info:
        await pub.finish()
    assert isinstance(info.value.__cause__, ValueError)
    assert state["n"] == 1


async def test_async_consumer_is_awaited_before_the_next_publication() -> None:
    clock = FakeClock()
    gate = asyncio.Event()
    delivered: list[int] = []
    counter = {"n": 0, "dirty": True}

    def produce() -> tuple[int, int] | None:
        if not counter["dirty"]:
            return None
        counter["dirty"] = False
        counter["n"] += 1
        return counter["n"], 10

    async def consume(payload: int) -> None:
        await gate.wait()
        delivered.append(payload)

    pub: AdaptivePublisher[int] = AdaptivePublisher(produce=produce, consume=consume, clock=clock)
    pub.mark_dirty()  # publication 1 in flight
    for _ in range(5):  # changes while the consumer is busy fold into one state
        counter["dirty"] = True
        pub.mark_dirty()
        clock.advance(0.5)
    assert counter["n"] == 1
    gate.set()
    await asyncio.sleep(0)  # let the delivery task complete (ordering, not timing)
    await asyncio.sleep(0)
    await pub.finish()
    assert delivered == [1, 2]


async def test_force_publishes_now_and_metadata_only_changes_are_metadata_updates() -> None:
    clock = FakeClock()
    rec = Recorder(clock)
    session = make_session(clock, rec, max_bytes=10)
    session.feed(b"abc\n")
    clock.advance(0.01)
    session.publisher.force()  # nothing changed: no update
    assert rec.kinds() == ["Replace"]
    session.feed(b"")
    session.capture.feed(b"")  # no-op feeds change nothing
    session.publisher.force()
    assert rec.kinds() == ["Replace"]
    await session.finish()
    assert isinstance(rec.items[0][1], Replace)
    assert not any(isinstance(u, Append | Metadata) for _, u in rec.items[1:])


def test_publisher_rejects_bad_pacing_parameters() -> None:
    with pytest.raises(ExecConfigError, match=r"min_interval must be a number >= 0.*-1"):
        AdaptivePublisher(produce=lambda: None, consume=lambda p: None, min_interval=-1)
    with pytest.raises(ExecConfigError, match=r"target_rate must be a number > 0.*0"):
        AdaptivePublisher(produce=lambda: None, consume=lambda p: None, target_rate=0)
