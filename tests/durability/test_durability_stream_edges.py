"""The edges of a durable stream's trailing timer (found by mutation testing,
docs/TESTING.md): it waits out exactly the rest of the interval and then writes, ends once
the source is clean or has nothing to give, a later change starts a new one, a fenced
stream starts none, a timer fenced before it fires never starts a task, ``aclose`` cancels
a waiting timer or task and waits for the task, whatever ended the task is swallowed
there, and the event loop never has an error to report.

Nothing is timed: the stream's clock is a fake one, the stream's loop timers are held and
fired by the test, and ``asyncio.sleep`` is replaced by one that records the delay asked
for and moves the fake clock on by it."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from durability_helpers import Clock, HeldTimers, Tap, hold_timers, trailing_done

from toolfold.chord import Encoder
from toolfold.durability import DurableStream, pending_tool_output, recover
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import Session

ADDRESS = pending_tool_output("op1", "c1")
#: Rounds of a bounded poll (each yields to the event loop once).
POLL_ROUNDS = 200


@pytest.fixture
def loop_reports() -> Iterator[list[dict[str, Any]]]:
    """What the event loop would log as an error during the test (asserted empty after)."""
    loop = asyncio.get_event_loop_policy().get_event_loop()
    reports: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reports.append(context))
    try:
        yield reports
    finally:
        loop.set_exception_handler(None)
    assert [r.get("message") for r in reports] == []


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> tuple[Clock, list[float]]:
    """A fake clock and the sleeps asked for; each sleep moves the clock on by its delay."""
    clock = Clock(1000.0)
    asked: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float) -> None:
        asked.append(delay)
        clock.now += delay
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    return clock, asked


@pytest.fixture
async def timers(monkeypatch: pytest.MonkeyPatch) -> HeldTimers:
    """The streams' trailing timers, held to be fired by hand."""
    return hold_timers(monkeypatch, DurableStream)


def sink() -> ToolOutput:
    return ToolOutput(OutputPolicy(retain="tail", max_bytes=4096))


def notify_and_get_task(ds: DurableStream) -> asyncio.Task[Any]:
    """Notify a stream with no wait left: its trailing task starts at once."""
    before = asyncio.all_tasks()
    ds.notify()
    [task] = asyncio.all_tasks() - before
    return task


async def text_of(session: Session) -> str:
    got = await recover(session, ADDRESS)
    assert got is not None
    return str(got.value["content"][0]["text"])


async def test_a_change_inside_the_interval_is_written_when_it_ends(
    session: Session,
    sleeps: tuple[Clock, list[float]],
    timers: HeldTimers,
    loop_reports: list[Any],
) -> None:
    clock, asked = sleeps
    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=1.0, clock=clock)
    out.write("a")
    assert await ds.force()
    clock.now += 0.25
    out.write("b")
    before = asyncio.all_tasks()
    ds.notify()
    ds.notify()  # one timer for the burst
    # One timer, of the rest of the interval, and no task while it waits.
    assert timers.delays == [0.75] and asyncio.all_tasks() == before
    clock.now += 0.75
    timers.fire()
    assert await trailing_done(ds) is not None
    assert asked == []  # the write, and no sleep once it is clean
    assert ds.stats.batches == 2 and await text_of(session) == "ab"


async def test_the_first_checkpoint_waits_an_interval_from_the_start(
    session: Session, timers: HeldTimers, loop_reports: list[Any]
) -> None:
    clock = Clock(1000.0)
    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=1.0, clock=clock)
    clock.now += 0.25
    out.write("a")
    ds.notify()
    # Paced from the stream's opening, not from the first change: the start record is
    # durable already, so the call's first batch can wait like any other.
    assert timers.delays == [0.75]
    clock.now += 0.75
    timers.fire()
    await trailing_done(ds)
    assert ds.stats.batches == 1 and await text_of(session) == "a"


async def test_a_timer_fenced_before_it_fires_never_starts_a_task(
    session: Session, timers: HeldTimers, loop_reports: list[Any]
) -> None:
    # A call that ends within its first interval (most do): settling fences the stream
    # before the trailing checkpoint is due, so none ever runs.
    clock = Clock(1000.0)
    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=1.0, clock=clock)
    out.write("a")
    before = asyncio.all_tasks()
    ds.notify()
    assert len(timers.pending()) == 1 and asyncio.all_tasks() == before
    await ds.aclose()
    assert timers.pending() == [] and asyncio.all_tasks() == before
    assert await session.read_list(ADDRESS) == []


async def test_a_change_after_the_timer_ended_starts_a_new_one(
    session: Session, loop_reports: list[Any]
) -> None:
    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=0)
    out.write("a")
    await asyncio.wait_for(notify_and_get_task(ds), 10)
    out.write("b")
    await asyncio.wait_for(notify_and_get_task(ds), 10)
    assert await text_of(session) == "ab"
    await ds.aclose()


async def test_a_fenced_stream_starts_no_timer(session: Session, loop_reports: list[Any]) -> None:
    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=0)
    ds.fence()
    out.write("late")
    before = asyncio.all_tasks()
    ds.notify()
    assert asyncio.all_tasks() == before
    assert await session.read_list(ADDRESS) == []


class NothingToTake:
    """A source that says it is dirty but gives no ops (e.g. changes that cancelled out)."""

    dirty = True

    def __init__(self) -> None:
        self.takes = 0

    def take(self) -> list[Any]:
        self.takes += 1
        if self.takes > 20:  # a timer that never gives up: fail, do not spin
            raise AssertionError("the timer keeps taking from a source with nothing to give")
        return []

    def rebase(self) -> None:
        pass


async def test_a_timer_that_finds_nothing_to_write_ends(
    session: Session, loop_reports: list[Any]
) -> None:
    source = NothingToTake()
    ds = DurableStream(session, ADDRESS, source, interval=0)
    await asyncio.wait_for(notify_and_get_task(ds), 10)
    assert source.takes == 1 and ds.stats.batches == 0 and ds.stats.failed == 0


async def test_aclose_cancels_a_waiting_task_and_waits_for_it(
    session: Session,
    monkeypatch: pytest.MonkeyPatch,
    timers: HeldTimers,
    loop_reports: list[Any],
) -> None:
    clock = Clock(1000.0)
    asked: list[float] = []

    async def endless_sleep(delay: float) -> None:
        asked.append(delay)
        await asyncio.Event().wait()

    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=60, clock=clock)
    out.write("a")
    assert await ds.force()
    out.write("b")
    monkeypatch.setattr(asyncio, "sleep", endless_sleep)
    ds.notify()
    assert timers.delays == [60]  # the timer waits out the interval
    # It fires while the stream's clock has not moved (the loop's ran ahead of it): the
    # task waits out the rest itself.
    before = asyncio.all_tasks()
    timers.fire()
    [task] = asyncio.all_tasks() - before
    for _ in range(POLL_ROUNDS):
        if asked:
            break
        await asyncio.wait([task], timeout=0)
    assert asked == [60]
    fired: list[bool] = []

    def rescue() -> None:  # only if aclose hangs on a task nobody cancelled
        fired.append(True)
        task.cancel()

    guard = asyncio.get_running_loop().call_later(10, rescue)
    await ds.aclose()
    guard.cancel()
    assert not fired
    assert task.done() and task.cancelled()  # aclose returned only once the task ended
    assert ds.stats.batches == 1


class Broken:
    """A source whose take fails with an error that is not a storage error."""

    dirty = True

    def take(self) -> list[Any]:
        raise RuntimeError("the source broke")

    def rebase(self) -> None:
        pass


async def test_a_timer_that_failed_is_swallowed_by_aclose_and_never_logged(
    session: Session, loop_reports: list[Any]
) -> None:
    async def run_and_drop() -> None:
        ds = DurableStream(session, ADDRESS, Broken(), interval=0)
        timer = notify_and_get_task(ds)
        await asyncio.wait([timer], timeout=10)
        assert isinstance(timer.exception(), RuntimeError)
        await ds.aclose()  # the timer's failure does not fail the close

    await run_and_drop()

    async def fail_unread() -> None:
        # Nobody awaits this one (as after a crash): its exception must not be reported
        # as never retrieved when the task is collected.
        ds = DurableStream(session, ADDRESS, Broken(), interval=0)
        timer = notify_and_get_task(ds)
        await asyncio.wait([timer], timeout=10)
        assert timer.done()

    await fail_unread()
    gc.collect()
    await asyncio.sleep(0)


async def test_a_forced_write_is_a_delta_unless_a_base_is_asked_for(session: Session) -> None:
    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=0)
    out.write("a" * 200)
    assert await ds.force()
    out.write("b")
    assert await ds.force()  # a settlement's final write: small, not a whole new base
    assert [e.tag for e in await session.read_list(ADDRESS)] == ["base", None]
    out.write("c")
    assert await ds.force(base=True)
    assert [e.tag for e in await session.read_list(ADDRESS)] == ["base"]
    assert await text_of(session) == "a" * 200 + "bc"


async def test_every_failed_write_is_counted_and_the_next_write_stands_alone(
    session: Session,
) -> None:
    tap = Tap(session)
    out = sink()
    ds = DurableStream(tap, ADDRESS, out.open_stream(), interval=0)  # type: ignore[arg-type]
    out.write("a" * 200)  # a large base: small deltas after it stay deltas
    assert await ds.checkpoint()
    for n, text in ((2, "x"), (3, "y")):
        out.write(text)
        tap.fail_at = n
        assert not await ds.checkpoint()
    assert ds.stats.failed == 2
    out.write("z")
    assert await ds.checkpoint()
    # The ops of the failed writes are gone from the encoder's view: the next batch must
    # not build on them, so it is a base holding everything.
    assert [e.tag for e in await session.read_list(ADDRESS)] == ["base"]
    assert await text_of(session) == "a" * 200 + "xyz"


class Prepared:
    """An :class:`OpSource` over ``{"a": text}`` whose every change is one ``s`` op, so the
    encoded size of each batch is known to the test."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pending: list[Any] = []
        self.base_next = True

    @property
    def dirty(self) -> bool:
        return self.base_next or bool(self.pending)

    def set(self, text: str) -> None:
        self.text = text
        self.pending.append(["s", ["a"], text])

    def take(self) -> list[Any]:
        if self.base_next:
            self.base_next = False
            self.pending.clear()
            return [["r", {"a": self.text}]]
        ops, self.pending = self.pending, []
        return ops

    def rebase(self) -> None:
        self.base_next = True


def encoded_sizes(base_text: str, *texts: str) -> list[int]:
    """The encoded sizes of the base and then of each delta, as a fresh stream writes them."""
    encoder = Encoder()
    wires = [encoder.encode([["r", {"a": base_text}]])]
    wires += [encoder.encode([["s", ["a"], text]]) for text in texts]
    return [len(orjson.dumps(w)) for w in wires]


def texts_of_total(base_text: str, total: int) -> list[str]:
    """Delta texts whose encoded sizes add up to exactly ``total`` bytes, each delta under a
    third of the base (so each is stored as a delta)."""
    largest = (encoded_sizes(base_text)[0] - 1) // 3
    texts: list[str] = []
    for _ in range(100):  # bounded: each round adds one delta of at least a few bytes
        left = total - sum(encoded_sizes(base_text, *texts)[1:])
        if left == 0:
            return texts
        smallest_after = encoded_sizes(base_text, *texts, "", "")[-1]
        want = left if left <= largest else min(largest, left - smallest_after)
        n = 0
        while encoded_sizes(base_text, *texts, "y" * n)[-1] < want:
            n += 1
        assert encoded_sizes(base_text, *texts, "y" * n)[-1] == want
        texts.append("y" * n)
    raise AssertionError(f"no deltas of {total} bytes in total")


async def run_prepared(session: Session, base_text: str, texts: list[str]) -> list[Any]:
    source = Prepared(base_text)
    ds = DurableStream(session, ADDRESS, source, interval=0)
    assert await ds.force()
    for text in [*texts, "last"]:
        source.set(text)
        assert await ds.force()
    assert await text_of_prepared(session) == "last"
    return [e.tag for e in await session.read_list(ADDRESS)]


async def text_of_prepared(session: Session) -> str:
    got = await recover(session, ADDRESS)
    assert got is not None
    return str(got.value["a"])


@pytest.mark.parametrize("below", [0, 1])
async def test_deltas_as_large_as_the_base_make_the_next_batch_a_base(
    session: Session, below: int
) -> None:
    base_text = "x" * 200
    base = encoded_sizes(base_text)[0]
    texts = texts_of_total(base_text, base - below)
    tags = await run_prepared(session, base_text, texts)
    if below == 0:  # the deltas weigh as much as the base: the next batch replaces them
        assert tags == ["base"]
    else:  # one byte less: the next batch is still a delta
        assert tags == ["base"] + [None] * (len(texts) + 1)


@pytest.mark.parametrize("third", [True, False])
async def test_a_delta_of_a_third_of_the_base_is_stored_as_a_base(
    session: Session, third: bool
) -> None:
    base_text = "x" * 200
    base = encoded_sizes(base_text)[0]
    base_text += "x" * ((3 - base % 3) % 3)  # a base whose size is a multiple of 3
    base = encoded_sizes(base_text)[0]
    assert base % 3 == 0
    n = 0
    target = base // 3 - (0 if third else 1)
    while encoded_sizes(base_text, "y" * n)[1] < target:
        n += 1
    assert encoded_sizes(base_text, "y" * n)[1] == target
    source = Prepared(base_text)
    ds = DurableStream(session, ADDRESS, source, interval=0)
    assert await ds.force()
    source.set("y" * n)
    assert await ds.force()
    tags = [e.tag for e in await session.read_list(ADDRESS)]
    assert tags == (["base"] if third else ["base", None])
    assert await text_of_prepared(session) == "y" * n


async def test_a_rebase_every_of_one_makes_every_batch_a_base(session: Session) -> None:
    out = sink()
    ds = DurableStream(session, ADDRESS, out.open_stream(), interval=0, rebase_every=1)
    assert ds.fenced is False
    for text in ("a", "b", "c"):
        out.write(text)
        assert await ds.force()
    assert [e.tag for e in await session.read_list(ADDRESS)] == ["base"]
    assert (ds.stats.batches, ds.stats.bases) == (3, 3)


async def test_every_batch_is_counted_and_a_delta_paces_the_next_write(
    session: Session,
) -> None:
    clock = Clock(1000.0)
    source = Prepared("x" * 200)
    ds = DurableStream(session, ADDRESS, source, interval=1.0, clock=clock)
    clock.now += 1.0  # the first checkpoint waits an interval from the start
    assert await ds.checkpoint()  # a base
    for text in ("b", "c"):
        clock.now += 1.0
        source.set(text)
        assert await ds.checkpoint()  # a delta
        source.set(text + "!")
        assert not await ds.checkpoint()  # within the interval after that delta
    assert [e.tag for e in await session.read_list(ADDRESS)] == ["base", None, None]
    assert (ds.stats.batches, ds.stats.bases, ds.stats.skipped_paced) == (3, 1, 2)


async def test_plan_without_arguments_plans_an_ordinary_batch(session: Session) -> None:
    source = Prepared("x" * 200)
    ds = DurableStream(session, ADDRESS, source, interval=0)
    await session.commit(ds.plan)
    source.set("b")
    await session.commit(ds.plan)
    source.set("c")
    await session.commit(lambda: [w for w in [ds.plan_batch()] if w is not None])
    assert [e.tag for e in await session.read_list(ADDRESS)] == ["base", None, None]
    assert await text_of_prepared(session) == "c"
