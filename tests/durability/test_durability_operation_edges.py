"""The edges of operations and their calls (found by mutation testing, docs/TESTING.md):
the settlement's writes and the entry key, the stored call record and its refusals, what
an operation records and in how many transactions, settling once, a failed settlement
leaving the call unsettled, and which entries ``pending_operations`` counts as settled."""

from __future__ import annotations

from typing import Any

import pytest
from durability_helpers import CountingReads, HeldTimers, Tap

from toolfold.chord import Tracker
from toolfold.durability import (
    MISSING,
    CallRecord,
    Durability,
    DurabilityError,
    FencedError,
    MemoError,
    PendingOperation,
    RecoveryError,
    TrackerSource,
    lease_token,
    operation_call,
    operation_meta,
    operation_tool_memo,
    pending_tool_output,
    read_lease,
    recover,
    settle_writes,
)
from toolfold.storage import (
    AppendEntry,
    BackendError,
    RetireScope,
    Session,
    append_entry,
    ephemeral_scope,
    set_value,
)


def record(call: str, op: str = "op1", **extra: Any) -> CallRecord:
    return CallRecord(op, f"inv-{call}", "bash", call, {"cmd": call}, "run1", "turn1", extra)


def source() -> TrackerSource:
    return TrackerSource(Tracker({"content": ""}))


@pytest.mark.parametrize(
    ("call_id", "key"), [("c1", "c1"), ("", None), ("a\x00b", None), (7, None), (None, None)]
)
def test_the_settlement_entry_is_keyed_by_a_usable_call_id(call_id: Any, key: Any) -> None:
    message = {"role": "toolResult", "tool_call_id": call_id, "content": ["big"], "x": 1}
    [write] = settle_writes(message)
    assert isinstance(write, AppendEntry)
    assert write.entry == message and write.key == key
    assert write.summary == {"role": "toolResult", "tool_call_id": call_id, "x": 1}


def test_the_last_settlement_retires_the_scope_in_the_same_writes() -> None:
    scope = ephemeral_scope("op1")
    entry, retire = settle_writes({"tool_call_id": "c1", "content": []}, retire=scope)
    assert isinstance(entry, AppendEntry) and isinstance(retire, RetireScope)
    assert retire == RetireScope(scope)


def test_a_call_record_round_trips_and_omits_an_empty_extra() -> None:
    plain = record("c1")
    assert plain.to_json() == {
        "operation_id": "op1",
        "invocation_id": "inv-c1",
        "tool_name": "bash",
        "tool_call_id": "c1",
        "args": {"cmd": "c1"},
        "run_id": "run1",
        "turn_id": "turn1",
    }
    rich = record("c2", replay_safe=True)
    assert rich.to_json()["extra"] == {"replay_safe": True}
    for r in (plain, rich):
        assert CallRecord.from_json(r.to_json(), "here") == r
    bare = {k: v for k, v in plain.to_json().items() if k != "args"}
    assert CallRecord.from_json({**bare, "extra": None}, "here") == CallRecord(
        "op1", "inv-c1", "bash", "c1", None, "run1", "turn1", {}
    )


@pytest.mark.parametrize("field", ["operation_id", "invocation_id", "tool_name", "run_id"])
def test_a_call_record_missing_a_field_is_refused_with_where_it_is(field: str) -> None:
    data = {k: v for k, v in record("c1").to_json().items() if k != field}
    with pytest.raises(RecoveryError) as refused:
        CallRecord.from_json(data, "op.calls/op1:inv-c1")
    assert str(refused.value) == f"malformed call record at op.calls/op1:inv-c1: {data!r:.120}"
    assert isinstance(refused.value.__cause__, KeyError)


@pytest.mark.parametrize("data", [["a", "list"], {**record("c").to_json(), "extra": [1, 2]}])
def test_a_call_record_of_the_wrong_shape_is_refused(data: Any) -> None:
    with pytest.raises(RecoveryError, match=r"^malformed call record at there: "):
        CallRecord.from_json(data, "there")


async def test_an_operation_is_recorded_in_one_transaction(session: Session) -> None:
    await session.commit([append_entry({"before": True})])
    tap = Tap(session)
    d = Durability(tap, interval=0.5, rebase_every=9)  # type: ignore[arg-type]
    op = await d.start_operation("op1", "run1", [record("c1"), record("c2")])
    assert tap.commits == 1
    assert await session.get_value(operation_meta("op1")) == {"run_id": "run1", "after_seq": 1}
    assert await session.get_value(operation_call("op1", "inv-c2")) == record("c2").to_json()
    assert op.lease is None and await read_lease(session, "op1") is None
    assert (op.operation_id, op.run_id, op.scope) == ("op1", "run1", ephemeral_scope("op1"))
    assert op.unsettled == {"inv-c1", "inv-c2"}
    inv = op.invocation("inv-c1", source())
    assert inv.operation is op and inv.record == record("c1") and inv.settled is False
    stream = inv.stream
    assert stream.session is tap and stream.address == pending_tool_output("op1", "inv-c1")
    assert (stream.interval, stream.rebase_every, stream.lease) == (0.5, 9, None)


async def test_a_record_of_another_operation_is_refused_and_nothing_is_written(
    session: Session,
) -> None:
    with pytest.raises(DurabilityError) as refused:
        await Durability(session).start_operation("op1", "run1", [record("c1", op="op2")])
    assert str(refused.value) == "call 'c1' names operation 'op2', not 'op1'"
    assert await session.live_scopes() == []


async def test_an_unknown_invocation_is_refused_with_what_to_do(session: Session) -> None:
    op = await Durability(session).start_operation("op1", "run1", [record("c1")])
    with pytest.raises(DurabilityError) as refused:
        op.invocation("nope", source())
    assert str(refused.value) == (
        "invocation 'nope' is not part of operation 'op1'; register it with start_operation()"
    )


async def test_a_call_settles_once_and_the_last_one_retires_the_scope(session: Session) -> None:
    op = await Durability(session).start_operation("op1", "run1", [record("c1"), record("c2")])
    inv = op.invocation("inv-c1", source())
    await op.settle("inv-c1", {"tool_call_id": "c1", "content": []})
    assert inv.settled is True and inv.stream.fenced
    assert op.unsettled == {"inv-c2"}
    assert [s.id for s in await session.live_scopes()] == ["op1"]
    with pytest.raises(DurabilityError) as refused:
        await op.settle("inv-c1", {"tool_call_id": "c1", "content": []})
    assert str(refused.value) == (
        "invocation 'inv-c1' of operation 'op1' is already settled (or unknown); a call "
        "settles exactly once"
    )
    await op.settle("inv-c2", {"tool_call_id": "c2", "content": []})
    assert op.unsettled == frozenset()
    assert await session.live_scopes() == []
    assert [e.key for e in await session.read_entries()] == ["c1", "c2"]


async def test_a_settlement_that_fails_leaves_the_call_unsettled(session: Session) -> None:
    tap = Tap(session)
    d = Durability(tap)  # type: ignore[arg-type]
    op = await d.start_operation("op1", "run1", [record("c1")])
    tap.fail_at = tap.commits + 1
    with pytest.raises(BackendError):
        await op.settle("inv-c1", {"tool_call_id": "c1", "content": []})
    assert op.unsettled == {"inv-c1"}
    assert [s.id for s in await session.live_scopes()] == ["op1"]
    await op.settle("inv-c1", {"tool_call_id": "c1", "content": []})  # the retry settles it
    assert await session.live_scopes() == []


async def test_retire_ends_an_operation_whose_calls_all_settled(session: Session) -> None:
    d = Durability(session)
    op = await d.start_operation("op1", "run1", [record("c1")])
    await session.commit([append_entry({"tool_call_id": "c1", "operation_id": "op1"})])
    [pending] = await d.pending_operations()
    assert pending.settled == {"inv-c1"}
    await d.reopen(pending).retire()
    assert await session.live_scopes() == []
    assert op.unsettled == {"inv-c1"}  # the other object is untouched


async def test_pending_operations_skip_scopes_that_hold_no_call_operation(
    session: Session,
) -> None:
    # Skipped scopes on both sides of a real one (by name and by creation order).
    await session.commit([set_value(operation_meta("a-msg"), {"kind": "assistant"})])
    await session.commit([set_value(operation_meta("b-odd"), ["not", "a", "dict"])])
    await session.commit([set_value(operation_call("c-stray", "x"), record("x").to_json())])
    await Durability(session).start_operation("op1", "run1", [record("c1")])
    await session.commit([set_value(operation_meta("y-msg"), {"kind": "assistant"})])
    await session.commit([set_value(operation_meta("z-odd"), "text")])
    assert len(await session.live_scopes()) == 6
    assert [p.operation_id for p in await Durability(session).pending_operations()] == ["op1"]


async def test_a_malformed_call_record_of_a_pending_operation_names_its_key(
    session: Session,
) -> None:
    await Durability(session).start_operation("op1", "run1", [record("c1")])
    await session.commit([set_value(operation_call("op1", "inv-c1"), {"tool_name": "bash"})])
    with pytest.raises(RecoveryError) as refused:
        await Durability(session).pending_operations()
    assert str(refused.value) == (
        "malformed call record at op.calls/op1:inv-c1: {'tool_name': 'bash'}"
    )


async def test_pending_operations_fall_back_and_filter_calls(session: Session) -> None:
    c1 = record("c1")
    foreign = record("c9", op="op-other")
    await session.commit(
        [
            set_value(operation_meta("op1"), {"after_seq": "not a seq"}),
            set_value(operation_call("op1", "inv-c1"), c1.to_json()),
            set_value(operation_call("op1", "inv-c9"), foreign.to_json()),
        ]
    )
    [pending] = await Durability(session).pending_operations()
    assert pending == PendingOperation("op1", "op1", (c1,), frozenset(), None)


async def test_only_this_operations_entries_count_as_settled(session: Session) -> None:
    d = Durability(session)
    await session.commit([append_entry({"tool_call_id": "c1"})])  # before the operation
    await d.start_operation("op1", "run1", [record("c1"), record("c2"), record("c3")])
    await session.commit(
        [
            append_entry({"tool_call_id": "c2", "operation_id": "op-other"}),
            append_entry(["c3"]),
            append_entry({"tool_call_id": "c3"}),  # no operation id: this operation's
        ]
    )
    [pending] = await d.pending_operations()
    assert pending.settled == {"inv-c3"}
    assert pending.run_id == "run1"


async def test_a_settled_entry_past_the_first_page_of_256_is_found(session: Session) -> None:
    # The transcript is read 256 entries at a time: a long one never in one go.
    await Durability(session).start_operation("op1", "run1", [record("c1")])
    await session.commit([append_entry({"tool_call_id": f"x{i}"}) for i in range(256)])
    await session.commit([append_entry({"tool_call_id": "c1"})])
    reads = CountingReads(session, "read_entries")
    [pending] = await Durability(reads).pending_operations()  # type: ignore[arg-type]
    assert pending.settled == {"inv-c1"}
    assert reads.limits == [256, 256]


async def test_a_reopened_operation_keeps_its_settled_calls(session: Session) -> None:
    d = Durability(session)
    await d.start_operation("op1", "run1", [record("c1"), record("c2")])
    await session.commit([append_entry({"tool_call_id": "c1"})])
    [pending] = await d.pending_operations()
    op = d.reopen(pending)
    assert (op.operation_id, op.run_id, op.lease) == ("op1", "run1", None)
    assert op.unsettled == {"inv-c2"} and set(op.records) == {"inv-c1", "inv-c2"}


async def test_a_calls_stream_is_paced_by_the_durability_clock(session: Session) -> None:
    now = [1000.0]
    d = Durability(session, interval=1.0, clock=lambda: now[0])
    op = await d.start_operation("op1", "run1", [record("c1")])
    tracker = Tracker({"n": 0})
    stream = op.invocation("inv-c1", TrackerSource(tracker)).stream
    assert not await stream.checkpoint()  # within the first interval
    now[0] += 1.0
    assert await stream.checkpoint()
    tracker.state["n"] = 1
    assert not await stream.checkpoint()  # within the interval
    now[0] += 1.0
    assert await stream.checkpoint()


async def test_a_claimed_lease_lasts_the_durability_ttl(session: Session) -> None:
    now = [1_000_000.0]
    a = Durability(session, host="A", lease_ttl=5, wall_clock=lambda: now[0])
    op = await a.start_operation("op1", "run1", [record("c1")])
    assert op.lease is not None
    op.lease.stop_heartbeat()
    now[0] += 6
    b = Durability(session, host="B", lease_ttl=7, wall_clock=lambda: now[0])
    [pending] = await b.pending_operations()
    claimed = await b.claim(pending, "B")
    assert claimed.lease is not None
    claimed.lease.stop_heartbeat()
    held = await read_lease(session, "op1")
    assert held is not None and (held.owner, held.expires) == ("B", now[0] + 7)


async def test_memos_are_read_and_written_at_the_invocations_address(session: Session) -> None:
    op = await Durability(session).start_operation("op1", "run1", [record("c1")])
    inv = op.invocation("inv-c1", source())
    assert await inv.get_memo("step") is MISSING
    await inv.set_memo("step", {"done": 1})
    assert await session.get_value(operation_tool_memo("op1", "inv-c1", "step")) == {"done": 1}
    assert await inv.get_memo("step") == {"done": 1}
    assert await inv.get_memo("other") is MISSING
    await inv.set_memo("zero", 0)
    assert await inv.get_memo("zero") == 0  # a falsy memo is a memo
    with pytest.raises(MemoError, match=r"^invalid memo name 'a b': "):
        await inv.get_memo("a b")


async def test_retiring_a_leased_operation_ends_its_lease(session: Session) -> None:
    d = Durability(session, host="A", lease_ttl=5)
    op = await d.start_operation("op1", "run1", [record("c1")])
    assert op.lease is not None and await read_lease(session, "op1") is not None
    await op.retire()
    assert await session.live_scopes() == []
    assert await read_lease(session, "op1") is None
    assert await session.get_value(lease_token("op1")) == {"settled": op.lease.token}


async def test_the_heartbeat_runs_until_the_last_call_settles(
    session: Session, beats: HeldTimers
) -> None:
    # Stopped after the first of two calls, the lease would lapse while the second runs;
    # left running after the last, it would keep renewing a lease that has ended.
    d = Durability(session, host="A", lease_ttl=60)
    op = await d.start_operation("op1", "run1", [record("c1"), record("c2")])
    assert len(beats.pending()) == 1
    await op.settle("inv-c1", {"tool_call_id": "c1", "content": []})
    assert len(beats.pending()) == 1
    await op.settle("inv-c2", {"tool_call_id": "c2", "content": []})
    assert beats.pending() == []


async def test_a_leased_calls_writes_carry_the_lease_and_stop_at_a_takeover(
    session: Session,
) -> None:
    now = [1_000_000.0]
    a = Durability(session, host="A", lease_ttl=5, interval=0, wall_clock=lambda: now[0])
    op = await a.start_operation("op1", "run1", [record("c1")])
    assert op.lease is not None
    op.lease.stop_heartbeat()
    tracker = Tracker({"n": 0})
    stream = op.invocation("inv-c1", TrackerSource(tracker)).stream
    assert stream.lease is op.lease
    assert await stream.force()
    now[0] += 6
    b = Durability(session, host="B", lease_ttl=5, wall_clock=lambda: now[0])
    [pending] = await b.pending_operations()
    claimed = await b.claim(pending, "B")
    assert claimed.lease is not None
    claimed.lease.stop_heartbeat()
    tracker.state["n"] = 1
    with pytest.raises(FencedError):
        await stream.force()
    assert stream.fenced
    got = await recover(session, pending_tool_output("op1", "inv-c1"))
    assert got is not None and got.value == {"n": 0}
