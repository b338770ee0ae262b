"""The storage conformance suite: every backend must behave identically here."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from storage_backends import Store

from toolfold.storage import (
    SESSION,
    ClosedError,
    CommitResult,
    EphemeralWrite,
    InvalidValueError,
    ListElement,
    ScopeError,
    Session,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    Write,
    append_entry,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)

OP_A = ephemeral_scope("op_a")
OP_B = ephemeral_scope("op b/é")  # needs percent-encoding on disk


async def snapshot(s: Session) -> dict[str, Any]:
    """Everything observable about a session, for before/after comparisons."""
    out: dict[str, Any] = {"next_seq": s.next_seq, "scopes": await s.live_scopes()}
    for scope in (SESSION, OP_A, OP_B):
        out[f"values {scope!r}"] = await s.scan_values("ns", "", scope)
        out[f"list {scope!r}"] = await s.read_list(list_address("ns", "l", scope))
    out["entries"] = await s.read_entries()
    return out


# -- values and lists ---------------------------------------------------------------


async def test_value_lifecycle(store: Store) -> None:
    s = await store.session()
    a = value("ns", "k")
    assert await s.get_value(a) is None
    r = await s.commit([set_value(a, {"x": [1, 2.5, "é", None, True]})])
    assert r == CommitResult((1,)) and r.last_seq == 1
    assert await s.get_value(a) == {"x": [1, 2.5, "é", None, True]}
    await s.commit([set_value(a, "second")])
    assert await s.get_value(a) == "second"
    await s.commit([delete_value(a)])
    assert await s.get_value(a) is None
    await s.commit([delete_value(a)])  # deleting a missing value is fine
    await s.commit([set_value(a, None)])
    assert await s.get_value(a) is None
    assert await s.scan_values("ns") == [("k", None)]  # a stored null is not a missing value


async def test_scan_values_prefix_and_key_order(store: Store) -> None:
    s = await store.session()
    keys = ["b", "a:2", "a:10", "a:1", "ab", "é", "A", "a"]
    await s.commit([set_value(value("ns", k), k.upper()) for k in keys])
    await s.commit([set_value(value("other", "a:3"), 0)])
    await s.commit([set_value(value("ns", "a:4", OP_A), 0)])
    assert [k for k, _ in await s.scan_values("ns")] == sorted(keys)
    assert await s.scan_values("ns", "a:") == [("a:1", "A:1"), ("a:10", "A:10"), ("a:2", "A:2")]
    assert await s.scan_values("ns", "a:", OP_A) == [("a:4", 0)]
    assert await s.scan_values("ns", "zzz") == []


async def test_list_lifecycle(store: Store) -> None:
    s = await store.session()
    addr = list_address("ns", "l")
    assert await s.read_list(addr) == []
    r = await s.commit([append_list(addr, [1]), append_list(addr, {"b": 2}, tag="base")])
    assert r.seqs == (1, 2)
    assert await s.read_list(addr) == [ListElement(1, [1], None), ListElement(2, {"b": 2}, "base")]
    await s.commit([delete_list(addr)])
    assert await s.read_list(addr) == []
    await s.commit([append_list(addr, "again")])
    assert await s.read_list(addr) == [ListElement(4, "again", None)]


async def test_entries_append_and_page(store: Store) -> None:
    s = await store.session()
    for i in range(5):
        await s.commit([append_entry({"i": i}), set_value(value("ns", "k"), i)])
    entries = await s.read_entries()
    assert [(e.seq, e.value) for e in entries] == [(1 + 2 * i, {"i": i}) for i in range(5)]
    assert [e.seq for e in await s.read_entries(cursor=3, limit=2)] == [5, 7]
    assert await s.read_entries(cursor=9) == []
    assert await s.read_entries(limit=0) == []


async def test_entries_by_key_position_and_summary(store: Store) -> None:
    s = await store.session()
    await s.commit([append_entry("untagged")])
    for i in range(1, 13):
        await s.commit(
            [append_entry({"big": "x" * 100, "i": i}, key=f"call-{i}", summary={"i": i})]
        )
    await s.commit([append_entry("tail")])
    assert await s.count_entries() == 14
    assert await s.count_entries(keyed=True) == 12
    # The n-th keyed entry, by position, whatever unkeyed entries sit around it.
    [fifth] = await s.read_entries(keyed=True, offset=4, limit=1)
    assert (fifth.key, fifth.value, fifth.summary) == (
        "call-5",
        {"big": "x" * 100, "i": 5},
        {"i": 5},
    )
    # The last N, newest first, as summaries only (the entries themselves are not read).
    last = await s.read_entries(order="desc", keyed=True, limit=3, summaries=True)
    assert [(e.key, e.value, e.summary) for e in last] == [
        ("call-12", None, {"i": 12}),
        ("call-11", None, {"i": 11}),
        ("call-10", None, {"i": 10}),
    ]
    [newest] = await s.read_entries(order="desc", limit=1)
    assert (newest.value, newest.key, newest.summary) == ("tail", None, None)
    assert [e.seq for e in await s.read_entries(order="desc", cursor=5, offset=1)] == [3, 2, 1]
    # By key: exact, and by prefix (call-1 is a prefix of call-10..12), in seq order.
    [one] = await s.entries_by_key("call-1")
    assert one.value == {"big": "x" * 100, "i": 1}
    assert [e.key for e in await s.entries_by_key("call-1", prefix=True)] == [
        "call-1",
        "call-10",
        "call-11",
        "call-12",
    ]
    assert [e.key for e in await s.entries_by_key("call-1", prefix=True, limit=2)] == [
        "call-1",
        "call-10",
    ]
    assert await s.entries_by_key("call-99") == []
    s = await store.reopen(s)  # the index survives a reopen
    assert [e.summary for e in await s.entries_by_key("call-7")] == [{"i": 7}]
    assert await s.count_entries(keyed=True) == 12


async def test_entry_key_and_read_arguments_are_checked(store: Store) -> None:
    s = await store.session()
    for bad in ("", "a\x00b", "\ud800", 5):
        with pytest.raises(StorageError, match="key"):
            await s.commit([append_entry(1, key=bad)])  # type: ignore[arg-type]
    with pytest.raises(InvalidValueError, match="summary"):
        await s.commit([append_entry(1, key="k", summary={1})])  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="offset must be an int >= 0, got -1"):
        await s.read_entries(offset=-1)
    with pytest.raises(StorageError, match="order must be 'asc' or 'desc', got 'up'"):
        await s.read_entries(order="up")  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="key"):
        await s.entries_by_key("")
    assert await s.read_entries() == [] and s.next_seq == 1  # nothing was committed


async def test_independent_scopes(store: Store) -> None:
    s = await store.session()
    for scope, v in ((SESSION, "s"), (OP_A, "a"), (OP_B, "b")):
        await s.commit([set_value(value("ns", "k", scope), v)])
        await s.commit([append_list(list_address("ns", "l", scope), v)])
    for scope, v in ((SESSION, "s"), (OP_A, "a"), (OP_B, "b")):
        assert await s.get_value(value("ns", "k", scope)) == v
        assert [e.value for e in await s.read_list(list_address("ns", "l", scope))] == [v]
    await s.commit([delete_value(value("ns", "k", OP_A))])
    assert await s.get_value(value("ns", "k", SESSION)) == "s"
    assert await s.get_value(value("ns", "k", OP_B)) == "b"
    assert await s.live_scopes() == [OP_B, OP_A]  # ordered by id; OP_A still has its list


async def test_mixed_scope_transaction_rejected(store: Store) -> None:
    s = await store.session()
    await s.commit([set_value(value("ns", "k", OP_A), 1)])
    before = await snapshot(s)
    mixed: list[Write] = [
        set_value(value("ns", "k"), 2),
        append_list(list_address("ns", "l", OP_A), 3),
    ]
    with pytest.raises(ScopeError) as e:
        await s.commit(mixed)
    assert str(e.value) == (
        "a transaction must stay in one scope: write 0 (set_value of value 'ns'/'k' in "
        "SESSION) is in SESSION but write 1 (append_list of list 'ns'/'l' in "
        "ephemeral_scope('op_a')) is in ephemeral_scope('op_a'); commit them as two "
        "transactions"
    )
    two_ephemeral: list[EphemeralWrite] = [
        set_value(value("ns", "k", OP_A), 2),
        set_value(value("ns", "k", OP_B), 2),
    ]
    with pytest.raises(ScopeError, match=r"write 1 .* is in ephemeral_scope\(.op b/é.\)"):
        await s.commit(two_ephemeral)
    with pytest.raises(ScopeError, match="is in SESSION"):
        await s.commit([set_value(value("ns", "k", OP_A), 2), retire_scope(OP_A)])  # type: ignore[list-item]
    assert await snapshot(s) == before  # nothing committed, no seq used


# -- retirement ---------------------------------------------------------------------


async def _fill(s: Session) -> None:
    for scope in (OP_A, OP_B):
        await s.commit(
            [
                set_value(value("ns", "k", scope), scope.id),
                append_list(list_address("ns", "l", scope), 1, tag="base"),
                append_list(list_address("ns", "l", scope), 2),
            ]
        )
    await s.commit([set_value(value("ns", "k"), "session"), append_entry("e0")])


async def test_exact_retirement(store: Store) -> None:
    s = await store.session()
    await _fill(s)
    r = await s.commit([retire_scope(OP_A)])
    assert r.seqs == (9,)
    assert await s.get_value(value("ns", "k", OP_A)) is None
    assert await s.read_list(list_address("ns", "l", OP_A)) == []
    assert await s.scan_values("ns", "", OP_A) == []
    # the sibling scope and the session scope are untouched
    assert await s.get_value(value("ns", "k", OP_B)) == "op b/é"
    assert [e.seq for e in await s.read_list(list_address("ns", "l", OP_B))] == [5, 6]
    assert await s.get_value(value("ns", "k")) == "session"
    assert await s.live_scopes() == [OP_B]
    s = await store.reopen(s)
    assert await s.live_scopes() == [OP_B]
    assert await s.get_value(value("ns", "k", OP_A)) is None
    assert [e.seq for e in await s.read_list(list_address("ns", "l", OP_B))] == [5, 6]


async def test_retirement_atomic_with_sibling_session_writes(store: Store) -> None:
    s = await store.session()
    await _fill(s)
    settle = [
        append_entry({"role": "tool", "content": "done"}),
        set_value(value("ns", "result"), 42),
        retire_scope(OP_A),
    ]
    assert (await s.commit(settle)).seqs == (9, 10, 11)
    assert [e.value for e in await s.read_entries()] == ["e0", {"role": "tool", "content": "done"}]
    assert await s.live_scopes() == [OP_B]

    # A settlement that fails (bad value after the retirement) commits nothing at all:
    # the scope keeps its data, the entry is absent.
    before = await snapshot(s)
    with pytest.raises(InvalidValueError):
        await s.commit([append_entry("late"), retire_scope(OP_B), set_value(value("ns", "x"), {1})])  # type: ignore[arg-type]
    after = await snapshot(s)
    assert after["scopes"] == [OP_B]
    assert after["entries"] == before["entries"]
    assert after[f"list {OP_B!r}"] == before[f"list {OP_B!r}"]
    s = await store.reopen(s)
    assert await s.live_scopes() == [OP_B]
    assert [e.value for e in await s.read_entries()][-1] == {"role": "tool", "content": "done"}


async def test_empty_retirement(store: Store) -> None:
    s = await store.session()
    await _fill(s)
    before = await snapshot(s)
    never_used = ephemeral_scope("never-used")
    assert (await s.commit([retire_scope(never_used)])).seqs == (9,)
    after = await snapshot(s)
    assert after.pop("next_seq") == 10
    before.pop("next_seq")
    assert after == before
    assert (await s.commit([retire_scope(OP_A), retire_scope(OP_A)])).seqs == (10, 11)
    assert await s.live_scopes() == [OP_B]


async def test_reuse_after_retirement(store: Store) -> None:
    s = await store.session()
    addr = list_address("ns", "l", OP_A)
    await s.commit([append_list(addr, "old-1"), set_value(value("ns", "old", OP_A), 1)])
    await s.commit([retire_scope(OP_A)])
    await s.commit([append_list(addr, "new-1", tag="base")])
    await s.commit([set_value(value("ns", "new", OP_A), 2)])
    for _ in range(2):
        assert await s.read_list(addr) == [ListElement(4, "new-1", "base")]
        assert await s.scan_values("ns", "", OP_A) == [("new", 2)]
        assert await s.live_scopes() == [OP_A]
        s = await store.reopen(s)
    await s.commit([retire_scope(OP_A)])
    await s.commit([append_list(addr, "third")])
    s = await store.reopen(s)
    assert await s.read_list(addr) == [ListElement(7, "third", None)]


# -- the global sequence ----------------------------------------------------------


async def test_global_seq_consecutive_across_scopes(store: Store) -> None:
    s = await store.session()
    assert s.next_seq == 1
    seqs: list[int] = []
    seqs += (await s.commit([set_value(value("ns", "a"), 1), append_entry(1)])).seqs
    seqs += (await s.commit([append_list(list_address("ns", "l", OP_A), 1)])).seqs
    seqs += (await s.commit([set_value(value("ns", "b", OP_B), 1)])).seqs
    seqs += (await s.commit([retire_scope(OP_B), delete_value(value("ns", "a"))])).seqs
    assert seqs == [1, 2, 3, 4, 5, 6]
    assert s.next_seq == 7


async def test_seq_never_reused_after_deletes_and_reopen(store: Store) -> None:
    s = await store.session()
    await s.commit([set_value(value("ns", "a"), 1)])
    await s.commit([append_list(list_address("ns", "l", OP_A), 1)])
    await s.commit([append_list(list_address("ns", "l", OP_A), 2)])
    await s.commit([retire_scope(OP_A)])
    await s.commit([set_value(value("ns", "b", OP_B), 1)])
    await s.commit([delete_value(value("ns", "b", OP_B))])
    await s.commit([delete_value(value("ns", "a"))])
    # everything written is deleted or retired now; the high-water mark still counts it
    s = await store.reopen(s)
    assert s.next_seq == 8
    assert (await s.commit([append_entry("x")])).seqs == (8,)
    s = await store.reopen(s)
    assert s.next_seq == 9


async def test_failed_commit_leaves_no_trace_and_seq_moves_on(store: Store) -> None:
    s = await store.session()
    await s.commit([set_value(value("ns", "k"), 1), append_list(list_address("ns", "l"), 1)])
    before = await snapshot(s)
    with pytest.raises(InvalidValueError) as e:
        await s.commit(
            [
                set_value(value("ns", "k"), 2),
                append_list(list_address("ns", "l"), {"bad": object()}),  # type: ignore[dict-item]
            ]
        )
    assert "write 1 (append_list of list 'ns'/'l' in SESSION)" in str(e.value)
    assert "at path ['bad']" in str(e.value)
    assert "nothing of this transaction was committed" in str(e.value)
    assert await snapshot(s) == before
    r = await s.commit([append_entry("after")])
    assert r.last_seq is not None and r.last_seq >= 3
    s = await store.reopen(s)
    assert await s.get_value(value("ns", "k")) == 1
    assert s.next_seq == r.last_seq + 1


# -- tags, limit, stop_at_tag ---------------------------------------------------------

TAGS = [None, "base", None, None, "base", None, "other", None, "base", None]


async def _tagged_list(s: Session) -> list[ListElement]:
    addr = list_address("ns", "l", OP_A)
    await s.commit([set_value(value("ns", "pad"), 0)])  # seqs start at 2: cursor != index
    for i, tag in enumerate(TAGS):
        await s.commit([append_list(addr, {"i": i}, tag=tag)])
    return await s.read_list(addr)


async def test_read_list_cursor_order_limit(store: Store) -> None:
    s = await store.session()
    addr = list_address("ns", "l", OP_A)
    full = await _tagged_list(s)
    assert [e.seq for e in full] == list(range(2, 12))
    assert [e.tag for e in full] == TAGS
    assert await s.read_list(addr, cursor=5) == full[4:]
    assert await s.read_list(addr, cursor=5, limit=2) == full[4:6]
    assert await s.read_list(addr, order="desc") == full[::-1]
    assert await s.read_list(addr, order="desc", cursor=5) == full[:3][::-1]
    assert await s.read_list(addr, order="desc", cursor=5, limit=2) == full[1:3][::-1]
    assert await s.read_list(addr, order="desc", limit=3) == full[-3:][::-1]
    assert await s.read_list(addr, cursor=11) == []
    assert await s.read_list(addr, order="desc", cursor=2) == []
    assert await s.read_list(addr, limit=0) == []
    assert await s.read_list(addr, cursor=100, order="desc", limit=1) == [full[-1]]


async def test_stop_at_tag_inclusive_and_never_past_the_limit(store: Store) -> None:
    s = await store.session()
    addr = list_address("ns", "l", OP_A)
    full = await _tagged_list(s)
    # desc from the end: stops after including the newest base (index 8)
    assert await s.read_list(addr, order="desc", stop_at_tag="base") == full[8:][::-1]
    # limit reached before the tag: the page ends at the limit, the caller can tell
    page = await s.read_list(addr, order="desc", stop_at_tag="other", limit=3)
    assert page == full[7:][::-1] and all(e.tag != "other" for e in page)
    page = await s.read_list(addr, order="desc", stop_at_tag="other", limit=4)
    assert page == full[6:][::-1] and page[-1].tag == "other"
    # asc stops at the first base after the cursor
    assert await s.read_list(addr, stop_at_tag="base") == full[:2]
    assert await s.read_list(addr, cursor=full[1].seq, stop_at_tag="base") == full[2:5]
    # a tag that never occurs: the whole page
    assert await s.read_list(addr, stop_at_tag="nope", limit=4) == full[:4]


@pytest.mark.parametrize("limit", [1, 2, 3, 10])
async def test_recovery_paging_backwards_to_base(store: Store, limit: int) -> None:
    """The durable-recovery read: page backwards until the newest base, in any page size."""
    s = await store.session()
    addr = list_address("ns", "l", OP_A)
    full = await _tagged_list(s)
    got: list[ListElement] = []
    cursor: int | None = None
    for _ in range(len(full) + 1):  # bounded: a cursor bug fails here, not at the timeout
        page = await s.read_list(addr, cursor=cursor, order="desc", limit=limit, stop_at_tag="base")
        got += page
        if not page or page[-1].tag == "base":
            break
        cursor = page[-1].seq
    else:
        pytest.fail(f"paging did not reach the base in {len(full) + 1} pages: cursor {cursor}")
    assert got == full[8:][::-1]


@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_paging_reads_everything_exactly_once(store: Store, order: str) -> None:
    s = await store.session()
    addr = list_address("ns", "l", OP_A)
    full = await _tagged_list(s)
    got: list[ListElement] = []
    cursor: int | None = None
    for _ in range(len(full) + 1):  # bounded: a cursor bug fails here, not at the timeout
        page = await s.read_list(addr, cursor=cursor, order=order, limit=3, stop_at_tag="base")  # type: ignore[arg-type]
        if not page:
            break
        got += page
        cursor = page[-1].seq
    else:
        pytest.fail(f"paging did not end in {len(full) + 1} pages: cursor {cursor}")
    assert got == (full if order == "asc" else full[::-1])


# -- close / reopen -------------------------------------------------------------------


async def test_close_reopen_round_trip(store: Store) -> None:
    s = await store.session()
    await _fill(s)
    await s.commit([retire_scope(OP_B)])
    await s.commit([append_list(list_address("ns", "l"), ["x", {"y": [1.5, -2, 2**53 - 1]}], "t")])
    before = await snapshot(s)
    s = await store.reopen(s)
    assert await snapshot(s) == before
    assert (await s.commit([append_entry("more")])).seqs == (before["next_seq"],)


# -- the session line ------------------------------------------------------------------


async def test_callable_payload_is_evaluated_inside_the_line(store: Store) -> None:
    s = await store.session()
    addr = list_address("ns", "checkpoints", OP_A)
    gate = asyncio.Event()
    entered = asyncio.Event()
    inner = s._commit_writes

    async def gated(writes: Any, scope: Any) -> tuple[int, ...]:
        entered.set()
        await gate.wait()
        return await inner(writes, scope)

    s._commit_writes = gated  # type: ignore[method-assign]
    state = {"version": 1}
    evaluated: list[tuple[int, int]] = []

    def checkpoint() -> list[EphemeralWrite]:
        evaluated.append((state["version"], s.next_seq))
        return [append_list(addr, dict(state))]

    first = asyncio.create_task(s.commit([append_list(addr, {"version": 0})]))
    await entered.wait()  # the first commit holds the line
    second = asyncio.create_task(s.commit(checkpoint))
    await asyncio.sleep(0)  # let `second` queue on the line (no timing involved)
    assert evaluated == []  # not evaluated when requested...
    state["version"] = 2
    s._commit_writes = inner  # type: ignore[method-assign]
    gate.set()
    r1, r2 = await asyncio.gather(first, second)
    # ...but when executed: it saw the newest state and the first commit's seq
    assert evaluated == [(2, r1.seqs[0] + 1)]
    assert r2.seqs == (r1.seqs[0] + 1,)
    assert [e.value for e in await s.read_list(addr)] == [{"version": 0}, {"version": 2}]


async def test_callable_returning_nothing_uses_no_seq(store: Store) -> None:
    s = await store.session()
    await s.commit([append_entry(1)])
    assert await s.commit(lambda: []) == CommitResult(())
    assert CommitResult(()).last_seq is None
    assert await s.commit([]) == CommitResult(())
    assert s.next_seq == 2
    assert (await s.commit(lambda: [append_entry(2)])).seqs == (2,)


async def test_callable_that_raises_commits_nothing(store: Store) -> None:
    s = await store.session()

    def boom() -> list[Write]:
        raise RuntimeError("payload failed")

    with pytest.raises(RuntimeError, match="payload failed"):
        await s.commit(boom)
    assert s.next_seq == 1
    assert (await s.commit([append_entry(1)])).seqs == (1,)


async def test_concurrent_commits_are_serialised_and_gap_free(store: Store) -> None:
    s = await store.session()
    addr = list_address("ns", "l")
    n = 40

    def writes(i: int) -> list[Write]:
        return [append_list(addr, [i, "first"]), append_list(addr, [i, "second"])]

    results = await asyncio.gather(
        *(s.commit(writes(i) if i % 2 else (lambda i=i: writes(i))) for i in range(n))  # type: ignore[misc]
    )
    all_seqs = sorted(seq for r in results for seq in r.seqs)
    assert all_seqs == list(range(1, 2 * n + 1))
    elements = await s.read_list(addr)
    assert [e.seq for e in elements] == all_seqs
    # each transaction's two writes are adjacent and in order
    for first, second in zip(elements[::2], elements[1::2], strict=True):
        assert first.value[0] == second.value[0]  # type: ignore[index]
        assert (first.value[1], second.value[1]) == ("first", "second")  # type: ignore[index]
        assert second.seq == first.seq + 1
    # commits ran in submission order (asyncio.Lock is FIFO)
    assert [r.seqs[0] for r in results] == [1 + 2 * i for i in range(n)]
    s = await store.reopen(s)
    assert await s.read_list(addr) == elements


async def test_cancelled_commit_keeps_the_line_consistent(store: Store) -> None:
    s = await store.session()
    gate = asyncio.Event()
    entered = asyncio.Event()
    inner = s._commit_writes

    async def gated(writes: Any, scope: Any) -> tuple[int, ...]:
        entered.set()
        await gate.wait()
        return await inner(writes, scope)

    s._commit_writes = gated  # type: ignore[method-assign]
    first = asyncio.create_task(s.commit([append_entry("first")]))
    await entered.wait()
    second = asyncio.create_task(s.commit([append_entry("second")]))
    first.cancel()
    await asyncio.sleep(0)
    assert not second.done()  # the cancelled commit still holds the line until it finishes
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await first
    s._commit_writes = inner  # type: ignore[method-assign]
    await second
    assert [e.value for e in await s.read_entries()] == ["first", "second"]


# -- repository, bad input, closed ---------------------------------------------------


async def test_repository_sessions(store: Store) -> None:
    repo = store.repository()
    assert await repo.list_sessions() == []
    s1 = await repo.create_session("alpha")
    await s1.commit([append_entry(1)])
    await s1.commit([append_list(list_address("ns", "l", OP_A), 1)])
    with pytest.raises(SessionExistsError, match="'alpha'"):
        await repo.create_session("alpha")
    s2 = await repo.open_session("beta", create=True)
    await s2.commit([set_value(value("ns", "k"), "beta")])
    assert await repo.list_sessions() == ["alpha", "beta"]
    await s1.close()
    with pytest.raises(SessionExistsError):
        await repo.create_session("alpha")
    await repo.delete_session("alpha")
    assert await repo.list_sessions() == ["beta"]
    with pytest.raises(SessionNotFoundError, match="no session 'alpha'"):
        await repo.open_session("alpha")
    with pytest.raises(SessionNotFoundError, match="'alpha'"):
        await repo.delete_session("alpha")
    fresh = await repo.create_session("alpha")  # a new session, nothing of the old one
    assert fresh.next_seq == 1 and await fresh.read_entries() == []
    assert await fresh.live_scopes() == []
    assert await s2.get_value(value("ns", "k")) == "beta"  # the other session untouched


async def test_open_session_twice_and_delete_open_session_refused(store: Store) -> None:
    repo = store.repository()
    s = await repo.create_session("x")
    with pytest.raises(StorageError, match="session 'x' is already open"):
        await repo.open_session("x")
    with pytest.raises(StorageError, match="session 'x' is open in this repository"):
        await repo.delete_session("x")
    await s.close()
    assert (await repo.open_session("x")).name == "x"


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "a b", "x" * 129, "é", "..", "a\x00"])
async def test_invalid_session_names(store: Store, name: str) -> None:
    repo = store.repository()
    with pytest.raises(StorageError, match=r"invalid session name .*use 1-128 characters"):
        await repo.open_session(name, create=True)
    assert await repo.list_sessions() == []


async def test_closed_session_and_repository(store: Store) -> None:
    repo = store.repository()
    s = await repo.open_session("s", create=True)
    await s.commit([append_entry(1)])
    await s.close()
    await s.close()  # idempotent
    with pytest.raises(ClosedError, match="session 's' is closed"):
        await s.commit([append_entry(2)])
    with pytest.raises(ClosedError):
        await s.read_entries()
    with pytest.raises(ClosedError):
        await s.get_value(value("ns", "k"))
    s = await repo.open_session("s")
    assert [e.value for e in await s.read_entries()] == [1]
    await repo.close()
    assert s.closed
    with pytest.raises(ClosedError, match=r"repository .* is closed"):
        await repo.list_sessions()
    with pytest.raises(ClosedError):
        await s.read_entries()


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        (float("nan"), "value at path []: nan is not a finite number"),
        ({"a": [1, float("inf")]}, "value at path ['a', 1]: inf is not a finite number"),
        ({1: "x"}, "value at path []: object key 1 is not a str"),
        ("\ud800", "holds a lone surrogate"),
        ({"k": ["\udc00"]}, "value at path ['k', 0]: string '\\udc00' holds a lone surrogate"),
        (2**64, "integer 18446744073709551616 is beyond ±9007199254740991"),
        (2**53, "integer 9007199254740992 is beyond ±9007199254740991"),
        ((1, 2), "tuple (1, 2) is not a JSON value (use a list)"),
        (b"bytes", "bytes b'bytes' is not a JSON value"),
        ({"s": {1, 2}}, "value at path ['s']: set {1, 2} is not a JSON value"),
    ],
)
async def test_non_json_values_rejected_with_address(
    store: Store, bad: object, fragment: str
) -> None:
    s = await store.session()
    await s.commit([set_value(value("ns", "k"), "kept")])
    before = await snapshot(s)
    with pytest.raises(InvalidValueError) as e:
        await s.commit([set_value(value("ns", "k"), bad)])  # type: ignore[arg-type]
    assert "write 0 (set_value of value 'ns'/'k' in SESSION)" in str(e.value)
    assert fragment in str(e.value)
    assert isinstance(e.value, TypeError)
    assert await snapshot(s) == before
    s = await store.reopen(s)
    assert await s.get_value(value("ns", "k")) == "kept"


async def test_bad_read_arguments(store: Store) -> None:
    s = await store.session()
    addr = list_address("ns", "l")
    with pytest.raises(StorageError, match="limit must be an int >= 0 or None, got -1"):
        await s.read_list(addr, limit=-1)
    with pytest.raises(StorageError, match="order must be 'asc' or 'desc', got 'up'"):
        await s.read_list(addr, order="up")  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="cursor must be a seq"):
        await s.read_list(addr, cursor="3")  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="stop_at_tag must be a non-empty str"):
        await s.read_list(addr, stop_at_tag="")
    with pytest.raises(StorageError, match="read_list needs a list_address"):
        await s.read_list(value("ns", "l"))  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="needs a list of writes"):
        await s.commit(append_entry(1))  # type: ignore[call-overload]
    with pytest.raises(StorageError, match="not a storage write: str"):
        await s.commit(["nope"])  # type: ignore[list-item]
    assert s.next_seq == 1


async def test_a_wire_batch_of_the_deepest_replicated_value_is_storable(store: Store) -> None:
    """Storage holds what Chord replicates: a value at chord.MAX_DEPTH inside the batch and op
    that carry it (2 more levels) fits; past the encoder's 254 levels it is refused cleanly."""
    from toolfold.chord import MAX_DEPTH

    def nest(n: int) -> Any:
        v: Any = 1
        for _ in range(n):
            v = [v]
        return v

    s = await store.session()
    batch = [["r", nest(MAX_DEPTH)]]
    await s.commit([append_list(list_address("ns", "l"), batch, "base")])
    assert [e.value for e in await s.read_list(list_address("ns", "l"))] == [batch]
    with pytest.raises(InvalidValueError, match="nested deeper than 254 levels"):
        await s.commit([append_list(list_address("ns", "l"), nest(255))])
