"""Leases and fencing in one process, on every in-process backend (the multi-process and
PostgreSQL versions are in test_durability_hosts_pg.py): a live lease keeps other hosts
out, an expired one is taken over by exactly one host with a newer token, and every
write of the old holder is then refused with FencedError and changes nothing."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from typing import Any

import pytest
from durability_helpers import Clock, Store
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.chord import track
from toolfold.durability import (
    CallRecord,
    Durability,
    DurableOperation,
    FencedError,
    LeaseHeldError,
    TrackerSource,
    lease_holder,
    lease_token,
    owner_gone,
    read_lease,
    recover,
)
from toolfold.harness import DurableHooks, Harness, resume
from toolfold.storage import ConflictError, MemoryRepository


def record(call: str, op: str = "op1") -> CallRecord:
    return CallRecord(op, call, "echo", call, {}, op, "turn-1")


def message(call: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call, "content": [{"type": "text", "text": call}]}


def stop(*ops: DurableOperation) -> None:
    for op in ops:
        if op.lease is not None:
            op.lease.stop_heartbeat()


async def test_takeover_fences_every_write_of_the_old_host(store: Store) -> None:
    s = await store.session()
    clock = Clock()
    a = Durability(s, host="A", lease_ttl=5, wall_clock=clock, interval=0)
    b = Durability(s, host="B", lease_ttl=5, wall_clock=clock, interval=0)
    op_a = await a.start_operation("op1", "op1", [record("c1"), record("c2")])
    out = track({"text": ""})
    inv = op_a.invocation("c1", TrackerSource(out))
    try:
        out.state["text"] += "before "
        assert await inv.stream.checkpoint()
        [pending] = await b.pending_operations()
        assert pending.lease is not None and (pending.lease.owner, pending.lease.token) == ("A", 1)
        with pytest.raises(LeaseHeldError, match="held by host 'A'"):
            await b.claim(pending, "B")
        clock.now += 6  # A went silent past its lease
        op_b = await b.claim(pending, "B")
        assert op_b.lease is not None and op_b.lease.token == 2
        # A wakes up: its checkpoint, its memo, its settlement are all refused.
        out.state["text"] += "after "
        with pytest.raises(FencedError, match=r"token 1, but the stored token is 2 \(held by B\)"):
            await inv.stream.checkpoint()
        assert inv.stream.fenced
        with pytest.raises(FencedError) as info:
            await op_a.settle("c2", message("c2 by A"))
        assert isinstance(info.value, ConflictError)
        assert (info.value.holder, info.value.token, info.value.current_token) == ("B", 1, 2)
        got = await recover(s, inv.stream.address)
        assert got is not None and got.value == {"text": "before "}
        # B settles both calls; the lease ends with the operation.
        await op_b.settle("c1", message("c1 by B"))
        await op_b.settle("c2", message("c2 by B"))
        entries = [e.value["content"][0]["text"] for e in await s.read_entries()]  # type: ignore[index]
        assert entries == ["c1 by B", "c2 by B"]
        assert await s.live_scopes() == []
        assert await s.get_value(lease_token("op1")) == {"settled": 2}
        assert await s.get_value(lease_holder("op1")) is None
        # A resumer that listed the operation just before it settled cannot take it.
        with pytest.raises(LeaseHeldError, match="already settled"):
            await b.claim(pending, "B")
    finally:
        stop(op_a)


async def test_two_hosts_taking_over_the_same_operation_one_wins(store: Store) -> None:
    s = await store.session()
    clock = Clock()
    a = Durability(s, host="A", lease_ttl=5, wall_clock=clock)
    op_a = await a.start_operation("op1", "op1", [record("c1")])
    stop(op_a)
    clock.now += 6
    [pending] = await a.pending_operations()
    hosts = [Durability(s, host=h, lease_ttl=5, wall_clock=clock) for h in ("B", "C")]
    results = await asyncio.gather(
        *(d.claim(pending, d.host or "") for d in hosts), return_exceptions=True
    )
    won = [r for r in results if isinstance(r, DurableOperation)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1 and len(lost) == 1 and isinstance(lost[0], LeaseHeldError), results
    stop(*won)
    lease = await read_lease(s, "op1")
    assert lease is not None and lease.token == 2 and won[0].lease is not None
    assert lease.owner == won[0].lease.owner


async def test_resume_skips_an_operation_live_on_another_host(store: Store) -> None:
    s = await store.session()
    clock = Clock()
    a = Durability(s, host="A", lease_ttl=5, wall_clock=clock)
    op_a = await a.start_operation("op1", "op1", [record("c1")])
    stop(op_a)
    hooks = DurableHooks(Durability(s, wall_clock=clock))
    h = Harness([], hooks=hooks)
    assert await resume(h) == []
    [skipped] = hooks.skipped
    assert (skipped.operation_id, skipped.holder) == ("op1", "A")
    assert await s.read_entries() == []
    # Once the lease expired, resume settles it (interrupted: the tool is unknown here).
    clock.now += 6
    [result] = await resume(h)
    assert result.is_error and len(await s.read_entries()) == 1
    assert await s.live_scopes() == []


async def test_a_janitor_takes_only_expired_leases_never_unleased_operations(
    store: Store,
) -> None:
    s = await store.session()
    clock = Clock()
    # op-free: unleased (a process on this store that takes no lease), maybe running.
    await Durability(s, wall_clock=clock).start_operation(
        "op-free", "op-free", [record("f1", "op-free")]
    )
    leased = await Durability(s, host="A", lease_ttl=5, wall_clock=clock).start_operation(
        "op-leased", "op-leased", [record("l1", "op-leased")]
    )
    stop(leased)
    janitor = Durability(s, host="J", lease_ttl=5, wall_clock=clock)
    h = Harness([], hooks=DurableHooks(janitor))
    assert await janitor.orphaned_operations() == []
    assert await resume(h, orphans_only=True) == []  # A's lease is live
    clock.now += 6
    assert [p.operation_id for p in await janitor.orphaned_operations()] == ["op-leased"]
    [result] = await resume(h, orphans_only=True)
    assert result.tool_call_id == "l1" and result.outcome == "interrupted"
    assert [scope.id for scope in await s.live_scopes()] == ["op-free"]
    assert await resume(h, orphans_only=True) == []  # still not the unleased one
    assert [scope.id for scope in await s.live_scopes()] == ["op-free"]


async def test_a_lease_of_a_dead_process_of_this_machine_is_not_waited_out(
    store: Store,
) -> None:
    s = await store.session()
    clock = Clock()
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid names no process any more
    alive = subprocess.Popen(["sleep", "60"])
    try:
        for op, pid in (("op-gone", gone.pid), ("op-alive", alive.pid)):
            owner = f"{socket.gethostname()}:{pid}"
            started = await Durability(
                s, host=owner, lease_ttl=5, wall_clock=clock
            ).start_operation(op, op, [record(f"c-{op}", op)])
            stop(started)
        # Still within the lease, yet the dead process's operation is an orphan already.
        janitor = Durability(s, host="J", lease_ttl=5, wall_clock=clock)
        assert [p.operation_id for p in await janitor.orphaned_operations()] == ["op-gone"]
        [result] = await resume(Harness([], hooks=DurableHooks(janitor)), orphans_only=True)
        assert result.tool_call_id == "c-op-gone"
        assert [scope.id for scope in await s.live_scopes()] == ["op-alive"]
        # Another machine's "hostname:pid", or a name that is not one, is waited out.
        for owner in ("elsewhere:1", "worker-3", f"{socket.gethostname()}:x"):
            assert not owner_gone(owner)
    finally:
        alive.kill()
        alive.wait()


async def test_a_heartbeat_keeps_the_lease_and_stops_when_fenced(store: Store) -> None:
    s = await store.session()
    clock = Clock()
    a = Durability(s, host="A", lease_ttl=5, wall_clock=clock)
    op_a = await a.start_operation("op1", "op1", [record("c1")])
    stop(op_a)
    assert op_a.lease is not None
    clock.now += 4
    await op_a.lease.renew()
    held = await read_lease(s, "op1")
    assert held is not None and held.expires == clock.now + 5
    clock.now += 4  # 8 s after the start, but 4 s after the renewal: still live
    [pending] = await a.pending_operations()
    with pytest.raises(LeaseHeldError):
        await Durability(s, host="B", wall_clock=clock).claim(pending, "B")


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.booleans()),
        st.tuples(st.just("advance"), st.integers(0, 8)),
        st.tuples(st.just("renew"), st.integers(0, 5)),
        st.tuples(st.just("settle"), st.integers(0, 5)),
        st.tuples(st.just("janitor"), st.none()),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_a_janitor_settles_exactly_the_expired_leases_once_property(
    steps: list[tuple[str, Any]],
) -> None:
    """Hosts start leased or unleased operations, renew and settle them while the clock
    moves and a janitor sweeps: each sweep settles exactly the unsettled leased ones
    whose lease expired, never an unleased or live one, and a host whose operation was
    taken over is fenced when it renews or settles. Every call settles at most once."""

    async def scenario() -> None:
        s = await MemoryRepository().open_session("s", create=True)
        clock = Clock()
        ops: list[DurableOperation] = []
        leased: list[bool] = []
        expires: list[float] = []
        settled: set[int] = set()
        taken: set[int] = set()  # settled by the janitor: their hosts are fenced
        by_host: set[int] = set()  # settled by their own host
        janitor = Durability(s, host="J", lease_ttl=5, wall_clock=clock)
        h = Harness([], hooks=DurableHooks(janitor))
        for verb, arg in steps:
            if verb == "start":
                k = len(ops)
                d = Durability(s, host=f"H{k}" if arg else None, lease_ttl=5, wall_clock=clock)
                op = await d.start_operation(f"op{k}", f"op{k}", [record(f"c{k}", f"op{k}")])
                stop(op)
                ops.append(op)
                leased.append(arg)
                expires.append(clock.now + 5)
            elif verb == "advance":
                clock.now += arg
            elif verb in ("renew", "settle") and arg < len(ops) and arg not in by_host:
                op = ops[arg]
                if verb == "renew" and op.lease is None:
                    continue
                try:
                    if verb == "renew":
                        assert op.lease is not None
                        await op.lease.renew()
                        expires[arg] = clock.now + 5
                    else:
                        await op.settle(f"c{arg}", message(f"c{arg}"))
                        settled.add(arg)
                        by_host.add(arg)
                except FencedError:
                    assert arg in taken  # only a host that lost its operation
                else:
                    assert arg not in taken
            elif verb == "janitor":
                due = {
                    k
                    for k in range(len(ops))
                    if leased[k] and k not in settled and expires[k] <= clock.now
                }
                results = await resume(h, orphans_only=True)
                assert {int(r.tool_call_id[1:]) for r in results} == due
                settled |= due
                taken |= due
        for k in range(len(ops)):
            assert len(await s.entries_by_key(f"c{k}")) == (1 if k in settled else 0)
        live = {scope.id for scope in await s.live_scopes()}
        assert live == {f"op{k}" for k in range(len(ops)) if k not in settled}

    asyncio.run(scenario())


@pytest.mark.parametrize("before", ["taken", "held", "expired", "settled"])
async def test_a_leased_start_is_one_commit_or_writes_nothing(store: Store, before: str) -> None:
    """The lease and the operation's start (with the host's record) are one transaction:
    a new operation (no token) is started by one commit; a token already there makes that
    commit write nothing, and the read-then-decide path runs as for any takeover."""
    from durability_helpers import Tap

    from toolfold.durability import operation_call, operation_meta
    from toolfold.storage import set_value, value

    s = await store.session()
    clock = Clock()
    if before != "taken":
        other = await Durability(s, host="A", lease_ttl=5, wall_clock=clock).start_operation(
            "op1", "op1", [record("c0")]
        )
        stop(other)
        if before == "settled":
            await other.settle("c0", message("c0"))
        if before == "expired":
            clock.now += 6
    tap = Tap(s)
    note = value("host.record", "c1")
    b = Durability(tap, host="B", lease_ttl=5, wall_clock=clock)  # type: ignore[arg-type]
    seq = s.next_seq
    if before in ("held", "settled"):
        with pytest.raises(LeaseHeldError):
            await b.start_operation("op1", "op1", [record("c1")], with_writes=[set_value(note, 1)])
        assert tap.commits == 1  # the combined commit, refused: no second try
        assert await s.get_value(note) is None
        assert await s.get_value(operation_call("op1", "c1")) is None
        owner = None if before == "settled" else "A"
        held = await read_lease(s, "op1")
        assert (held.owner if held else None) == owner
        return
    op = await b.start_operation("op1", "op1", [record("c1")], with_writes=[set_value(note, 1)])
    stop(op)
    # Taken: one commit; expired: the refused combined commit, then the takeover's.
    assert tap.commits == (1 if before == "taken" else 2)
    assert op.lease is not None and op.lease.token == (1 if before == "taken" else 2)
    s = await store.reopen(s)
    assert await s.get_value(lease_token("op1")) == op.lease.token
    lease = await read_lease(s, "op1")
    assert lease is not None and lease.owner == "B"
    assert await s.get_value(note) == 1
    assert (await s.get_value(operation_call("op1", "c1")) or {}).get("tool_call_id") == "c1"
    meta = await s.get_value(operation_meta("op1"))
    assert isinstance(meta, dict) and meta["after_seq"] < seq + 3
