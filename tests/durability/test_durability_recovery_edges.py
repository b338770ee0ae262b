"""The edges of the durable addresses and of recovery (found by mutation testing,
docs/TESTING.md): the stored names every host and version finds an operation's data by,
the memo names accepted, recovery from the newest base only, paging that ends exactly on
a page boundary, and the text of every refusal."""

from __future__ import annotations

from typing import Any

import pytest
from durability_helpers import CountingReads

from toolfold.durability import (
    MemoError,
    RecoveredStream,
    RecoveryError,
    decode_base,
    load_memo_seed,
    operation_call,
    operation_memo_seed,
    operation_message,
    operation_meta,
    operation_tool_memo,
    pending_assistant_output,
    pending_tool_output,
    recover,
    validate_memo_name,
)
from toolfold.storage import (
    EphemeralScope,
    Session,
    append_list,
    ephemeral_scope,
    list_address,
    set_value,
)


def _parts(address: Any) -> tuple[str, str, EphemeralScope]:
    return (address.namespace, address.key, address.scope)


def test_every_address_has_its_documented_name_in_the_operation_scope() -> None:
    # Another host, or the next version, finds an operation's data by exactly these names.
    scope = ephemeral_scope("op1")
    assert _parts(pending_tool_output("op1", "c1")) == ("pending.tool_output", "op1:c1", scope)
    assert _parts(pending_assistant_output("op1", "m1")) == (
        "pending.assistant_output",
        "op1:m1",
        scope,
    )
    assert _parts(operation_tool_memo("op1", "c1", "n")) == ("op.tool_memo", "op1:c1:n", scope)
    assert _parts(operation_memo_seed("op1", "c1")) == ("op.tool_memo_seed", "op1:c1", scope)
    assert _parts(operation_call("op1", "c1")) == ("op.calls", "op1:c1", scope)
    assert _parts(operation_message("op1", "m1")) == ("op.messages", "op1:m1", scope)
    assert _parts(operation_meta("op1")) == ("op.meta", "op1", scope)


@pytest.mark.parametrize("name", ["a", "A-z_0.9/x", "x" * 128])
def test_a_valid_memo_name_is_returned_as_is(name: str) -> None:
    assert validate_memo_name(name) == name


@pytest.mark.parametrize("name", ["", "x" * 129, "a b", "é", "a\n", 7, None])
def test_an_invalid_memo_name_is_refused_with_the_rule(name: object) -> None:
    with pytest.raises(MemoError) as refused:
        validate_memo_name(name)
    assert str(refused.value) == (
        f"invalid memo name {name!r}: use 1-128 characters from A-Z a-z 0-9 _ . - /"
    )


LIST = list_address("pending.tool_output", "op1:c1", ephemeral_scope("op1"))


async def _append(session: Session, *batches: tuple[Any, str | None]) -> list[int]:
    result = await session.commit([append_list(LIST, wire, tag=tag) for wire, tag in batches])
    return list(result.seqs)


async def test_recovery_starts_at_the_newest_base_and_counts_from_there(session: Session) -> None:
    # Two bases in one list (a stream that rebased without dropping the older batches):
    # only the newest one and what follows it are read.
    seqs = await _append(
        session,
        ([["r", {"n": 1}]], "base"),
        ([["s", ["n"], 2]], None),
        ([["r", {"n": 10}]], "base"),
        ([["s", ["n"], 11]], None),
        ([["s", ["n"], 12]], None),
    )
    for page in (1, 2, 3, 64):
        got = await recover(session, LIST, page=page)
        assert got == RecoveredStream({"n": 12}, 3, seqs[2], seqs[4]), page


@pytest.mark.parametrize("page", [1, 2, 4])
async def test_recovery_pages_past_a_full_page_to_reach_the_base(
    session: Session, page: int
) -> None:
    # Base + 4 deltas: the pages hold exactly `page` batches each time, yet the base is
    # further back; a read that stops at a full page would miss it.
    batches: list[tuple[Any, str | None]] = [([["r", {"n": 0}]], "base")]
    batches += [([["s", ["n"], i]], None) for i in range(1, 5)]
    seqs = await _append(session, *batches)
    got = await recover(session, LIST, page=page)
    assert got == RecoveredStream({"n": 4}, 5, seqs[0], seqs[4])


async def test_a_stream_without_a_base_names_the_list_and_the_count(session: Session) -> None:
    await _append(session, ([["s", ["n"], 1]], None), ([["s", ["n"], 2]], None))
    with pytest.raises(RecoveryError) as refused:
        await recover(session, LIST, page=1)
    assert str(refused.value) == (
        f"{LIST} holds 2 batches but no base batch; the stream's first durable batch must "
        "be a base batch — the list was written by something else or truncated at the front"
    )


async def test_a_batch_that_cannot_be_folded_names_its_seq(session: Session) -> None:
    seqs = await _append(session, ([["r", {"n": 0}]], "base"), ([["d", ["gone", "x"]]], None))
    with pytest.raises(RecoveryError) as refused:
        await recover(session, LIST)
    text = str(refused.value)
    assert text.startswith(f"cannot fold batch seq {seqs[1]} of {LIST}: ")
    assert text.endswith("; the stream is corrupt after its last base batch")
    assert refused.value.__cause__ is not None


def test_decode_base_decodes_a_base_and_refuses_anything_else() -> None:
    assert decode_base([["r", {"a": [1]}]], "here") == {"a": [1]}
    long = ["s", ["n"], "x" * 100]
    with pytest.raises(RecoveryError) as refused:
        decode_base([long], "op.tool_memo_seed/op1:c1")
    expected = repr(str([long])[:80])
    assert str(refused.value) == (
        f"op.tool_memo_seed/op1:c1 does not hold a base batch (got {expected})"
    )
    with pytest.raises(RecoveryError, match=r"^there does not hold a base batch \(got '7'\)$"):
        decode_base(7, "there")
    with pytest.raises(RecoveryError) as bad:
        decode_base([["r", 1], ["d", ["x"]]], "seed")
    assert str(bad.value).startswith("cannot decode the base batch in seed: ")
    assert bad.value.__cause__ is not None


async def test_a_memo_seed_is_read_from_its_address(session: Session) -> None:
    assert await load_memo_seed(session, "op1", "c1") is None
    await session.commit([set_value(operation_memo_seed("op1", "c1"), [["r", {"k": "v"}]])])
    assert await load_memo_seed(session, "op1", "c1") == {"k": "v"}
    await session.commit([set_value(operation_memo_seed("op1", "c2"), [["s", ["k"], 1]])])
    with pytest.raises(RecoveryError) as refused:
        await load_memo_seed(session, "op1", "c2")
    assert str(refused.value).startswith(
        f"{operation_memo_seed('op1', 'c2')} does not hold a base batch"
    )


async def test_recovery_reads_a_page_at_a_time(session: Session) -> None:
    # A long stream is never read in one go: memory stays bounded by the page.
    batches: list[tuple[Any, str | None]] = [([["r", {"n": 0}]], "base")]
    batches += [([["s", ["n"], i]], None) for i in range(1, 5)]
    await _append(session, *batches)
    reads = CountingReads(session, "read_list")
    got = await recover(reads, LIST, page=2)  # type: ignore[arg-type]
    assert got is not None and got.value == {"n": 4}
    assert reads.limits == [2, 2, 2]
    reads.limits.clear()
    assert await recover(reads, LIST) is not None  # type: ignore[arg-type]
    assert reads.limits == [64]


async def test_recovery_folds_from_nothing_not_from_a_value(session: Session) -> None:
    # A batch tagged as a base that does not replace the root (written by something else)
    # is folded onto nothing at all, and refused as such.
    seqs = await _append(session, ([["p", [], 0, 0, ["x"]]], "base"))
    with pytest.raises(RecoveryError) as refused:
        await recover(session, LIST)
    assert str(refused.value) == (
        f"cannot fold batch seq {seqs[0]} of {LIST}: unresolvable path: [] at op 0: p needs a "
        "list, found NoneType; the stream is corrupt after its last base batch"
    )
