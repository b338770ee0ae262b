"""The edges of durable assistant messages (found by mutation testing, docs/TESTING.md):
what ``start_message`` records and in how many transactions, the exact entry a settlement
writes, settling once, which unsettled messages ``pending_messages`` reports and with
which fallbacks, and how a crashed message with no usable checkpoint is settled."""

from __future__ import annotations

import re
from typing import Any

import pytest
from durability_helpers import Tap

from toolfold.chord import Tracker
from toolfold.durability import (
    DurabilityError,
    PendingMessage,
    TrackerSource,
    message_entry,
    operation_message,
    operation_meta,
    pending_assistant_output,
    pending_messages,
    settle_interrupted_message,
    start_message,
)
from toolfold.storage import (
    Session,
    append_list,
    ephemeral_scope,
    set_value,
)

IDS = {"message_id": "m1", "run_id": "r1", "turn_id": "t1", "operation_id": "msg-1"}


def test_the_entry_is_the_state_plus_the_ids_and_shares_nothing_with_it() -> None:
    state = {"role": "user", "message_id": "forged", "content": [{"type": "text", "text": "a"}]}
    entry = message_entry(state, **IDS)
    assert entry == {
        "role": "assistant",
        "content": [{"type": "text", "text": "a"}],
        "message_id": "m1",
        "run_id": "r1",
        "turn_id": "t1",
        "operation_id": "msg-1",
    }
    entry["content"][0]["text"] = "changed"
    assert state["content"] == [{"type": "text", "text": "a"}]  # a deep copy


async def test_starting_a_message_records_it_in_one_transaction(session: Session) -> None:
    await session.commit([append_list(pending_assistant_output("other", "x"), [["r", 1]])])
    tap = Tap(session)
    tracker = Tracker({"role": "assistant", "content": []})
    msg = await start_message(
        tap,  # type: ignore[arg-type]
        run_id="r1",
        turn_id="t1",
        message_id="m1",
        source=TrackerSource(tracker),
        interval=0.25,
        rebase_every=7,
    )
    assert tap.commits == 1
    assert re.fullmatch(r"msg-[0-9a-f]{16}", msg.operation_id)
    op = msg.operation_id
    assert await session.get_value(operation_meta(op)) == {
        "run_id": "r1",
        "after_seq": 1,  # the session's last seq when the message started
        "kind": "assistant",
    }
    assert await session.get_value(operation_message(op, "m1")) == {
        "message_id": "m1",
        "run_id": "r1",
        "turn_id": "t1",
    }
    assert (msg.session, msg.message_id, msg.run_id, msg.turn_id) == (tap, "m1", "r1", "t1")
    assert msg.settled is False
    stream = msg.stream
    assert stream.session is tap and stream.address == pending_assistant_output(op, "m1")
    assert (stream.interval, stream.rebase_every) == (0.25, 7)
    assert await pending_messages(session) == [PendingMessage(op, "m1", "r1", "t1")]


async def test_a_message_settles_once_in_one_transaction_and_fences_its_stream(
    session: Session,
) -> None:
    tap = Tap(session)
    tracker = Tracker({"role": "assistant", "content": []})
    msg = await start_message(
        tap,  # type: ignore[arg-type]
        run_id="r1",
        turn_id="t1",
        message_id="m1",
        source=TrackerSource(tracker),
        interval=0,
    )
    before = tap.commits
    entry = await msg.settle({"content": [{"type": "text", "text": "done"}]})
    assert tap.commits == before + 1
    assert entry == {
        "content": [{"type": "text", "text": "done"}],
        "role": "assistant",
        "message_id": "m1",
        "run_id": "r1",
        "turn_id": "t1",
        "operation_id": msg.operation_id,
    }
    assert [e.value for e in await session.read_entries()] == [entry]
    assert await session.live_scopes() == []
    assert msg.settled is True and msg.stream.fenced
    with pytest.raises(DurabilityError) as refused:
        await msg.settle({"content": []})
    assert str(refused.value) == "message 'm1' is already settled; a message settles once"
    assert len(await session.read_entries()) == 1


async def _record(session: Session, op: str, meta: Any, *records: tuple[str, Any]) -> None:
    scope = ephemeral_scope(op)
    writes = [set_value(operation_meta(op), meta)]
    writes += [set_value(operation_message(op, key), record) for key, record in records]
    await session.commit(writes)
    assert scope in await session.live_scopes()


async def test_only_assistant_operations_with_a_named_message_are_pending(
    session: Session,
) -> None:
    await _record(session, "tool-op", {"kind": "tool", "run_id": "r"}, ("a", {"message_id": "a"}))
    await _record(session, "no-kind", {"run_id": "r"}, ("b", {"message_id": "b"}))
    await _record(session, "listmeta", ["kind", "assistant"], ("c", {"message_id": "c"}))
    await _record(
        session,
        "msg-x",
        {"kind": "assistant", "run_id": "meta-run"},
        ("d", ["message_id", "d"]),  # not a record
        ("e", {"message_id": 5}),  # no message id
        ("f", {"message_id": "f"}),  # the run falls back to the meta's, the turn to ""
        ("g", {"message_id": "g", "run_id": "own", "turn_id": 3}),
    )
    await _record(session, "msg-y", {"kind": "assistant"}, ("h", {"message_id": "h"}))
    assert sorted(await pending_messages(session), key=lambda p: p.message_id) == [
        PendingMessage("msg-x", "f", "meta-run", ""),
        PendingMessage("msg-x", "g", "own", "3"),
        PendingMessage("msg-y", "h", "msg-y", ""),  # no run anywhere: the operation id
    ]


@pytest.mark.parametrize("checkpoint", [None, [["r", ["not", "a", "message"]]]])
async def test_a_crashed_message_without_a_message_checkpoint_settles_empty(
    session: Session, checkpoint: Any
) -> None:
    pending = PendingMessage("msg-z", "m9", "r9", "t9")
    await _record(session, "msg-z", {"kind": "assistant"}, ("m9", {"message_id": "m9"}))
    if checkpoint is not None:
        address = pending_assistant_output("msg-z", "m9")
        await session.commit([append_list(address, checkpoint, tag="base")])
    entry = await settle_interrupted_message(session, pending)
    assert entry == {
        "role": "assistant",
        "content": [],
        "stop_reason": "interrupted",
        "is_error": True,
        "message_id": "m9",
        "run_id": "r9",
        "turn_id": "t9",
        "operation_id": "msg-z",
    }
    assert [e.value for e in await session.read_entries()] == [entry]
    assert await session.live_scopes() == []
