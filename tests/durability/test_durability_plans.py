"""The write plans both call drivers share (asyncio's and ``toolfold run``'s direct one):
an operation's start, a lease's take, renewal, fence and release, a settlement."""

from __future__ import annotations

import pytest

from toolfold.durability import (
    CallRecord,
    DurabilityError,
    LeaseTerms,
    lease_holder,
    lease_info,
    lease_token,
    operation_call,
    operation_meta,
    result_entry,
    settlement_writes,
    start_writes,
)
from toolfold.storage import (
    AppendEntry,
    ConflictError,
    RetireScope,
    SetValue,
    delete_value,
    ephemeral_scope,
    expect,
    set_value,
)


def _terms(token: int) -> LeaseTerms:
    return LeaseTerms("op1", "host:1", token, ttl=9.0, clock=lambda: 100.0)


def test_taking_a_new_lease_expects_no_token_and_a_takeover_the_one_before() -> None:
    writes, first = _terms(1).take_writes([set_value(lease_holder("x"), 0)])
    assert first == expect(lease_token("op1"), None)
    holder = {"owner": "host:1", "token": 1, "expires": 109.0, "heartbeat": 100.0}
    assert writes == [
        set_value(lease_token("op1"), 1),
        set_value(lease_holder("op1"), holder),
        set_value(lease_holder("x"), 0),
    ]
    _, takeover = _terms(4).take_writes()
    assert takeover == expect(lease_token("op1"), 3)
    assert lease_info(holder) is not None and lease_info({"owner": "a"}) is None


def test_a_fenced_write_names_the_token_and_the_holder() -> None:
    conflict = ConflictError("x", address=lease_token("op1"), expected=2, found=3)
    fenced = _terms(2).fenced(
        conflict, lease_info({"owner": "other:7", "token": 3, "expires": 1, "heartbeat": 0})
    )
    assert (fenced.token, fenced.current_token, fenced.holder) == (2, 3, "other:7")
    assert "held by other:7" in str(fenced)
    assert "nobody: settled" in str(_terms(2).fenced(conflict, None))


def test_the_settlement_of_the_last_call_retires_the_scope_and_ends_the_lease() -> None:
    message = {"tool_call_id": "c1", "content": [], "is_error": False}
    scope = ephemeral_scope("op1")
    extra = [set_value(lease_holder("record"), 1)]
    last = settlement_writes(message, retire=scope, with_writes=extra, lease=_terms(2))
    assert isinstance(last[0], AppendEntry) and last[0].key == "c1"
    assert last[1] == RetireScope(scope)
    assert last[2:] == [
        *extra,
        set_value(lease_token("op1"), {"settled": 2}),
        delete_value(lease_holder("op1")),
    ]
    sibling = settlement_writes(message, retire=None, lease=_terms(2))
    assert len(sibling) == 1  # the lease outlives a call that is not the last


def test_an_operation_starts_with_its_meta_and_its_calls() -> None:
    record = CallRecord("op1", "c1", "bash", "c1", {"command": "true"}, "op1", "turn-1")
    writes = start_writes("op1", "run-1", [record], 7)
    assert writes == [
        set_value(operation_meta("op1"), {"run_id": "run-1", "after_seq": 7}),
        set_value(operation_call("op1", "c1"), record.to_json()),
    ]
    assert all(isinstance(w, SetValue) for w in writes)
    with pytest.raises(DurabilityError, match="names operation"):
        start_writes("op2", "run-1", [record], 7)
    entry = result_entry({"a": 1}, operation_id="op1", run_id="r", turn_id="t", what="w")
    assert list(entry) == ["a", "operation_id", "run_id", "turn_id", "what"]
