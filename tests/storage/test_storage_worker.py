"""``WorkerThread``: the SQLite store's one thread for its blocking calls."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.storage._worker import WorkerThread


async def test_calls_run_on_one_thread_of_their_own_in_submission_order() -> None:
    worker = WorkerThread("w")
    seen: list[tuple[int, int]] = []

    def job(i: int) -> int:
        seen.append((i, threading.get_ident()))
        return i * 10

    try:
        results = await asyncio.gather(*(worker.submit(lambda i=i: job(i)) for i in range(20)))
    finally:
        worker.shutdown()
    assert results == [i * 10 for i in range(20)]
    assert [i for i, _ in seen] == list(range(20))
    threads = {t for _, t in seen}
    assert len(threads) == 1
    assert threads != {threading.get_ident()}


async def test_what_a_call_raises_is_raised_to_its_caller_and_the_next_call_runs() -> None:
    worker = WorkerThread("w")

    def fail() -> None:
        raise ValueError("no")

    try:
        with pytest.raises(ValueError, match="no"):
            await worker.submit(fail)
        assert await worker.submit(lambda: 7) == 7
    finally:
        worker.shutdown()


async def test_a_call_cancelled_before_the_thread_takes_it_up_is_not_run() -> None:
    worker = WorkerThread("w")
    entered, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def block() -> str:
        entered.set()
        release.wait()
        return "first"

    try:
        first = worker.submit(block)
        await asyncio.to_thread(entered.wait)  # the thread is busy with the first call
        second = worker.submit(lambda: ran.append("second"))
        second.cancel()
        release.set()
        assert await first == "first"
        assert await worker.submit(lambda: "third") == "third"  # after the second's turn
    finally:
        worker.shutdown()
    assert ran == []


async def test_a_cancelled_running_call_runs_to_its_end_and_its_result_is_dropped() -> None:
    worker = WorkerThread("w")
    entered, release = threading.Event(), threading.Event()
    done: list[str] = []

    def block() -> None:
        entered.set()
        release.wait()
        done.append("ran")

    try:
        running = worker.submit(block)
        await asyncio.to_thread(entered.wait)
        running.cancel()
        release.set()
        await worker.submit(lambda: None)  # the call before it has ended
    finally:
        worker.shutdown()
    assert done == ["ran"]
    assert running.cancelled()


async def test_after_shutdown_no_call_is_taken_and_queued_ones_still_run() -> None:
    worker = WorkerThread("w")
    entered, release = threading.Event(), threading.Event()

    def block() -> str:
        entered.set()
        release.wait()
        return "a"

    first = worker.submit(block)
    await asyncio.to_thread(entered.wait)
    queued = worker.submit(lambda: "b")
    worker.shutdown()
    worker.shutdown()  # twice is once
    with pytest.raises(RuntimeError, match="shut down"):
        worker.submit(lambda: "c")
    release.set()
    assert (await first, await queued) == ("a", "b")


async def test_a_worker_shut_down_ends_its_thread() -> None:
    worker = WorkerThread("worker-that-ends")
    assert await worker.submit(lambda: 1) == 1
    [thread] = [t for t in threading.enumerate() if t.name == "worker-that-ends"]
    assert not thread.daemon  # an exit waits for the call it runs, as an executor's
    worker.shutdown()
    thread.join(30)
    assert not thread.is_alive()


def test_a_process_exits_with_a_worker_never_shut_down() -> None:
    # The interpreter's exit tells the worker to end (its queued calls run first).
    code = (
        "import asyncio\n"
        "from toolfold.storage._worker import WorkerThread\n"
        "w = WorkerThread('left-running')\n"
        "async def main():\n"
        "    print(await w.submit(lambda: 'ran'))\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "ran\n"


def test_a_worker_never_used_starts_no_thread_and_shuts_down() -> None:
    before = threading.active_count()
    worker = WorkerThread("w")
    worker.shutdown()
    assert threading.active_count() == before
    assert worker.closed


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(["ok", "raise", "cancel"]), min_size=1, max_size=12))
def test_every_call_ends_as_it_was_asked_to(plan: list[str]) -> None:
    # Each call returns, raises or is cancelled before it can run (the thread is held
    # until every call is queued): every future ends the matching way, and exactly
    # the calls not cancelled ran, in order.
    async def scenario() -> None:
        worker = WorkerThread("w")
        gate = threading.Event()
        ran: list[int] = []

        def job(i: int, kind: str) -> int:
            ran.append(i)
            if kind == "raise":
                raise KeyError(i)
            return i

        held = worker.submit(gate.wait)
        futures = [worker.submit(lambda i=i, k=k: job(i, k)) for i, k in enumerate(plan)]
        for future, kind in zip(futures, plan, strict=True):
            if kind == "cancel":
                future.cancel()
        gate.set()
        await held
        await worker.submit(lambda: None)
        worker.shutdown()
        for i, (future, kind) in enumerate(zip(futures, plan, strict=True)):
            if kind == "cancel":
                assert future.cancelled()
            elif kind == "raise":
                assert isinstance(future.exception(), KeyError)
            else:
                assert future.result() == i
        assert ran == [i for i, k in enumerate(plan) if k != "cancel"]

    asyncio.run(scenario())
