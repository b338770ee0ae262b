"""Durable assistant output: paced checkpoints of the message being generated, one
transaction for the final message + retirement, and resume after a crash."""

from __future__ import annotations

import asyncio
import contextlib

from durability_helpers import SimulatedCrash, Store, Tap, wait_reached

from toolfold.durability import pending_assistant_output, pending_messages, recover
from toolfold.harness import EventBus, Harness, MessageWriter


async def test_a_message_is_checkpointed_then_settled_with_its_scope_retired(store: Store) -> None:
    session = await store.session()
    reached = asyncio.Event()
    release = asyncio.Event()

    async def generate() -> MessageWriter:
        async with MessageWriter(
            bus=EventBus(),
            run_id="r",
            turn_id="t1",
            message_id="m1",
            session=session,
            interval=0.0,
        ) as w:
            w.out.text("The answer ")
            reached.set()
            await release.wait()
            w.out.text("is 42.")
            w.out.end("stop")
        return w

    task = asyncio.ensure_future(generate())
    await wait_reached(reached, task)
    [pending] = await pending_messages(session)
    assert (pending.message_id, pending.run_id, pending.turn_id) == ("m1", "r", "t1")

    async def checkpointed() -> str:
        found = await recover(session, pending_assistant_output(pending.operation_id, "m1"))
        return "" if found is None else found.value["content"][0]["text"]

    for _ in range(500):  # a bounded poll: the paced checkpoint is written by a timer task
        if await checkpointed() == "The answer ":
            break
        await asyncio.sleep(0.01)
    assert await checkpointed() == "The answer "
    release.set()
    writer = await task
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["role"] == "assistant" and entry["message_id"] == "m1"
    assert entry["content"] == [{"type": "text", "text": "The answer is 42."}]
    assert entry["stop_reason"] == "stop" and entry["is_error"] is False
    assert entry == writer.entry
    assert await session.live_scopes() == []
    assert await Harness([], session=session).resume() == []


async def test_a_crash_mid_answer_then_resume_keeps_the_partial_text(store: Store) -> None:
    tap = Tap(await store.session())
    reached = asyncio.Event()

    async def generate() -> None:
        async with MessageWriter(
            bus=EventBus(),
            run_id="r",
            turn_id="t2",
            message_id="m2",
            session=tap,  # type: ignore[arg-type]
            interval=0.0,
        ) as w:
            w.out.text("Partial thoughts about ")
            w.out.tool_call(0, id="c9", name="bash", arguments='{"comm')
            await w.durable.stream.force()  # type: ignore[union-attr]
            reached.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(generate())
    await wait_reached(reached, task)
    tap.crash_at = tap.commits + 1  # the process dies: nothing more reaches the store
    task.cancel()
    with contextlib.suppress(BaseException):
        await task
    session = await store.restart(tap)
    harness = Harness([], session=session)
    events: list[object] = []
    harness.bus.add_listener(events.append)
    assert await harness.resume() == []
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["message_id"] == "m2" and entry["turn_id"] == "t2"
    assert entry["stop_reason"] == "interrupted" and entry["is_error"] is True
    assert entry["content"][0] == {"type": "text", "text": "Partial thoughts about "}
    assert entry["content"][1]["arguments"] == '{"comm'
    assert await session.live_scopes() == []
    assert [type(e).__name__ for e in events] == ["MessageStart", "MessageUpdate", "MessageEnd"]


async def test_cancel_mid_answer_settles_it_as_interrupted(store: Store) -> None:
    session = await store.session()
    reached = asyncio.Event()

    async def generate() -> None:
        async with MessageWriter(
            bus=EventBus(), run_id="r", turn_id="t3", message_id="m3", session=session
        ) as w:
            w.out.text("cut short")
            reached.set()
            await asyncio.Event().wait()

    task = asyncio.ensure_future(generate())
    await wait_reached(reached, task)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["content"] == [{"type": "text", "text": "cut short"}]
    assert entry["stop_reason"] == "interrupted"
    assert await session.live_scopes() == []


def test_simulated_crash_is_a_base_exception() -> None:
    assert not issubclass(SimulatedCrash, Exception)
