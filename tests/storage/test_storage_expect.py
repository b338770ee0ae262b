"""Conditional commits (``commit(writes, expect=[...])``) on every backend: the check is
atomic with the commit, a refused commit writes nothing, and of two writers racing on
one precondition exactly one wins (SQL backends: two connections, like two hosts)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_backends import Store

from toolfold.storage import (
    ConflictError,
    MemoryRepository,
    ScopeError,
    StorageError,
    append_entry,
    append_list,
    ephemeral_scope,
    expect,
    list_address,
    set_value,
    value,
)

TOKEN = value("lease.token", "op1")
OP = ephemeral_scope("op1")


async def test_expect_guards_a_commit_in_any_scope(store: Store) -> None:
    s = await store.session()
    await s.commit([set_value(TOKEN, 1)], expect=[expect(TOKEN, None)])
    # An ephemeral-scope write guarded by a session-scope value: the fencing shape.
    await s.commit([append_list(list_address("out", "x", OP), "a")], expect=[expect(TOKEN, 1)])
    before = s.next_seq
    with pytest.raises(ConflictError, match=r"expected .*lease\.token.* to be 2, found 1") as info:
        await s.commit([append_list(list_address("out", "x", OP), "b")], expect=[expect(TOKEN, 2)])
    assert (info.value.expected, info.value.found) == (2, 1)
    assert [e.value for e in await s.read_list(list_address("out", "x", OP))] == ["a"]
    with pytest.raises(ConflictError):
        await s.commit([append_entry("late")], expect=[expect(TOKEN, None)])
    assert await s.read_entries() == []
    assert s.next_seq >= before  # a refused commit may burn seqs, never reuse them
    s = await store.reopen(s)
    assert await s.get_value(TOKEN) == 1
    r = await s.commit([set_value(TOKEN, 2)], expect=[expect(TOKEN, 1)])
    assert r.last_seq is not None and await s.get_value(TOKEN) == 2


async def test_expect_refuses_bad_preconditions(store: Store) -> None:
    s = await store.session()
    with pytest.raises(ScopeError, match="SESSION scope"):
        expect(value("lease.token", "k", OP), 1)  # type: ignore[arg-type]
    with pytest.raises(StorageError, match="expect must hold"):
        await s.commit([set_value(TOKEN, 1)], expect=["token"])  # type: ignore[list-item]
    assert await s.get_value(TOKEN) is None


async def test_two_writers_racing_on_one_token_one_wins(store: Store) -> None:
    a = await store.session()
    # SQL stores: a second repository is a second connection, as another host has.
    # Memory and JSONL have one writer per session, so the race is two tasks on it.
    shared = store.kind in ("sqlite", "postgres")
    b = await store.repository().open_session("s1") if shared else a
    await a.commit([set_value(TOKEN, 1)])
    for round_ in range(1, 21):
        results = await asyncio.gather(
            a.commit([set_value(TOKEN, round_ + 1)], expect=[expect(TOKEN, round_)]),
            b.commit([set_value(TOKEN, round_ + 1)], expect=[expect(TOKEN, round_)]),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1 and isinstance(errors[0], ConflictError), results
        assert await a.get_value(TOKEN) == round_ + 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 3)), max_size=12))
def test_expect_matches_a_model(steps: list[tuple[int | None, int]]) -> None:
    """Any sequence of "set to v if it is e" commits does what a dict would."""

    async def run() -> None:
        async with MemoryRepository() as repo:
            s = await repo.open_session("s", create=True)
            model: int | None = None
            for want, new in steps:
                try:
                    await s.commit([set_value(TOKEN, new)], expect=[expect(TOKEN, want)])
                    ok = True
                except ConflictError:
                    ok = False
                assert ok == (model == want)
                if ok:
                    model = new
                assert await s.get_value(TOKEN) == model

    asyncio.run(run())


HOLDER = value("lease.holder", "op1")
META = value("op.meta", "op1", OP)


async def test_commit_across_writes_both_scopes_in_one_commit(store: Store) -> None:
    s = await store.session()
    r = await s.commit_across(
        [set_value(TOKEN, 1), set_value(HOLDER, {"owner": "A"})],
        [set_value(META, {"run_id": "r"}), append_list(list_address("out", "x", OP), "a")],
        expect=[expect(TOKEN, None)],
    )
    assert len(r.seqs) == 4 and list(r.seqs) == sorted(r.seqs)
    s = await store.reopen(s)
    assert await s.get_value(TOKEN) == 1
    assert await s.get_value(HOLDER) == {"owner": "A"}
    assert await s.get_value(META) == {"run_id": "r"}
    assert [e.value for e in await s.read_list(list_address("out", "x", OP))] == ["a"]
    assert [sc.id for sc in await s.live_scopes()] == ["op1"]
    # Seqs go on after the commit, on reopen too.
    r2 = await s.commit([set_value(TOKEN, 2)])
    assert r2.seqs[0] > max(r.seqs)


async def test_commit_across_refused_writes_neither_scope(store: Store) -> None:
    s = await store.session()
    await s.commit([set_value(TOKEN, 7)])
    with pytest.raises(ConflictError):
        await s.commit_across(
            [set_value(TOKEN, 1), set_value(HOLDER, {"owner": "B"})],
            [set_value(META, {"run_id": "r"})],
            expect=[expect(TOKEN, None)],
        )
    s = await store.reopen(s)
    assert await s.get_value(TOKEN) == 7
    assert await s.get_value(HOLDER) is None
    assert await s.get_value(META) is None
    assert await s.live_scopes() == []


async def test_commit_across_checks_its_scopes(store: Store) -> None:
    s = await store.session()
    with pytest.raises(ScopeError, match="session_writes"):
        await s.commit_across([set_value(META, 1)], [set_value(META, 2)])
    with pytest.raises(ScopeError, match="one ephemeral scope"):
        await s.commit_across([set_value(TOKEN, 1)], [set_value(HOLDER, 2)])  # type: ignore[list-item]
    with pytest.raises(ScopeError):
        await s.commit_across(
            [set_value(TOKEN, 1)],
            [set_value(META, 1), set_value(value("op.meta", "op2", ephemeral_scope("op2")), 1)],
        )
    assert await s.get_value(TOKEN) is None and await s.live_scopes() == []
    # Either part empty: a plain commit of the other.
    await s.commit_across([set_value(TOKEN, 1)], [], expect=[expect(TOKEN, None)])
    await s.commit_across([], [set_value(META, 1)], expect=[expect(TOKEN, 1)])
    assert await s.get_value(META) == 1


@settings(max_examples=25, deadline=None)
@given(
    stored=st.sampled_from([None, 1, 2, {"settled": 1}]),
    wanted=st.sampled_from([None, 1, 2, {"settled": 1}]),
)
def test_commit_across_is_taken_only_when_its_precondition_holds(
    stored: object, wanted: object
) -> None:
    async def go() -> None:
        repo = MemoryRepository()
        s = await repo.open_session("s", create=True)
        if stored is not None:
            await s.commit([set_value(TOKEN, stored)])
        try:
            await s.commit_across(
                [set_value(TOKEN, 9)], [set_value(META, "start")], expect=[expect(TOKEN, wanted)]
            )
            taken = True
        except ConflictError:
            taken = False
        assert taken == (stored == wanted)
        assert await s.get_value(TOKEN) == (9 if taken else stored)
        assert await s.get_value(META) == ("start" if taken else None)
        await repo.close()

    asyncio.run(go())
