"""The edges of leases (found by mutation testing, docs/TESTING.md): the expiry instant,
which owners count as gone and that checking one never signals it, the stored names other
hosts read, the fenced error's fields and text, refused arguments, and the heartbeat
loop (renewing, surviving a failed renewal, stopping when told)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from durability_helpers import Clock, HeldTimers, settle_until

from toolfold.durability import (
    DurabilityError,
    FencedError,
    Lease,
    LeaseHeldError,
    LeaseInfo,
    acquire_lease,
    owner_gone,
    read_lease,
)
from toolfold.storage import BackendError, Session, set_value, value

#: Rounds of a bounded poll on the heartbeat (each yields to the loop for a few ms).
POLL_ROUNDS = 500


class Flaky:
    """A session wrapper whose next ``fail_commits`` commits or ``fail_reads`` value reads
    raise a :class:`BackendError` (a storage hiccup, not a lost lease)."""

    def __init__(self, inner: Session) -> None:
        self.inner = inner
        self.fail_commits = 0
        self.fail_reads = 0
        self.commits = 0
        #: Run once just before the next commit (another host acting in between).
        self.before_commit: Callable[[], Awaitable[object]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, writes: Any, **kw: Any) -> Any:
        await self._gate()
        return await self.inner.commit(writes, **kw)

    async def commit_across(self, session_writes: Any, scope_writes: Any, **kw: Any) -> Any:
        await self._gate()
        return await self.inner.commit_across(session_writes, scope_writes, **kw)

    async def _gate(self) -> None:
        self.commits += 1
        if self.before_commit is not None:
            hook, self.before_commit = self.before_commit, None
            await hook()
        if self.fail_commits:
            self.fail_commits -= 1
            raise BackendError("injected commit failure")

    async def get_value(self, address: Any) -> Any:
        if self.fail_reads:
            self.fail_reads -= 1
            raise BackendError("injected read failure")
        return await self.inner.get_value(address)


def test_a_lease_expires_at_its_expiry_instant() -> None:
    lease = LeaseInfo("elsewhere:1", 1, expires=100.0, heartbeat=90.0)
    assert lease.live(99.5)
    assert not lease.live(100.0)


async def test_a_takeover_is_allowed_exactly_when_the_lease_expires(session: Session) -> None:
    clock = Clock()
    first = await acquire_lease(session, "op1", "A", ttl=5, clock=clock)
    clock.now += 5  # exactly the expiry
    second = await acquire_lease(session, "op1", "B", ttl=5, clock=clock)
    assert (first.token, second.token) == (1, 2)


async def test_the_lease_is_stored_under_the_documented_names(session: Session) -> None:
    # Other hosts (and other versions) find the lease by these names: they are a format.
    clock = Clock()
    await acquire_lease(session, "op1", "A", ttl=5, clock=clock)
    assert await session.get_value(value("lease.token", "op1")) == 1
    holder = await session.get_value(value("lease.holder", "op1"))
    assert holder == {"owner": "A", "token": 1, "expires": clock.now + 5, "heartbeat": clock.now}


def test_which_owners_are_gone() -> None:
    here = socket.gethostname()
    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid names no process any more
    assert owner_gone(f"{here}:{gone.pid}")
    # The same dead pid on another machine, or no process at all: not knowable here.
    assert not owner_gone(f"elsewhere:{gone.pid}")
    assert not owner_gone(str(gone.pid))
    # This process itself, and pids no process can have.
    assert not owner_gone(f"{here}:{os.getpid()}")
    assert not owner_gone(f"{here}:0")
    assert not owner_gone(f"{here}:{2**80}")


def test_checking_whether_an_owner_is_gone_never_signals_it() -> None:
    alive = subprocess.Popen(["sleep", "60"])
    try:
        assert not owner_gone(f"{socket.gethostname()}:{alive.pid}")
    finally:
        alive.kill()
        alive.wait()
    # Killed by the test's SIGKILL, not by a signal the check sent first.
    assert alive.returncode == -signal.SIGKILL


async def test_a_bad_owner_or_ttl_is_refused_before_anything_is_written(
    session: Session,
) -> None:
    with pytest.raises(DurabilityError, match=r"a lease owner must be a non-empty host id, got ''"):
        await acquire_lease(session, "op1", "")
    with pytest.raises(DurabilityError, match=r"lease ttl must be > 0 seconds, got 0"):
        await acquire_lease(session, "op1", "A", ttl=0)
    assert await read_lease(session, "op1") is None


async def test_a_write_after_the_settlement_by_another_host_names_nobody(
    session: Session,
) -> None:
    clock = Clock()
    a = await acquire_lease(session, "op1", "A", ttl=5, clock=clock)
    clock.now += 6
    b = await acquire_lease(session, "op1", "B", ttl=5, clock=clock)
    await b.commit(b.release_writes())
    with pytest.raises(FencedError) as info:
        await a.renew()
    err = info.value
    assert str(err) == (
        "write of operation 'op1' by host 'A' refused: it carries fencing token 1, but the "
        "stored token is {'settled': 2} (held by nobody: settled); this host lost its lease "
        "and must stop working on the operation"
    )
    assert (err.operation_id, err.owner, err.token, err.holder) == ("op1", "A", 1, None)
    assert err.current_token == {"settled": 2}
    # The loss is remembered: the next write is refused without asking the store.
    with pytest.raises(FencedError) as again:
        await a.commit([set_value(value("x", "op1"), 1)])
    assert again.value is err


async def test_a_fenced_write_is_reported_even_if_the_holder_cannot_be_read(
    session: Session,
) -> None:
    clock = Clock()
    flaky = Flaky(session)
    a = await acquire_lease(flaky, "op1", "A", ttl=5, clock=clock)  # type: ignore[arg-type]
    clock.now += 6
    await acquire_lease(session, "op1", "B", ttl=5, clock=clock)
    flaky.fail_reads = 1  # the read of the new holder fails
    with pytest.raises(FencedError) as info:
        await a.renew()
    assert info.value.holder is None and info.value.current_token == 2
    assert "stored token is 2" in str(info.value)


async def wait_for_renewal(lease: Lease, session: Session, after: float) -> LeaseInfo:
    """Poll (bounded) until the stored lease shows a heartbeat at or after ``after``."""
    for _ in range(POLL_ROUNDS):
        held = await read_lease(session, lease.operation_id)
        if held is not None and held.heartbeat >= after:
            return held
        await asyncio.sleep(0.005)
    raise AssertionError(f"no heartbeat of {lease.operation_id!r} at or after {after}")


async def test_the_heartbeat_renews_and_outlives_a_failed_renewal(session: Session) -> None:
    clock = Clock()
    flaky = Flaky(session)
    # A short ttl so the heartbeat beats often; the lease's own clock is the fake one.
    lease = await acquire_lease(flaky, "op1", "A", ttl=0.03, clock=clock)  # type: ignore[arg-type]
    lease.start_heartbeat()
    try:
        clock.now += 100
        held = await wait_for_renewal(lease, session, clock.now)
        assert held.expires == clock.now + 0.03 and held.token == 1
        # A storage hiccup is not a lost lease: the heartbeat tries again.
        failed_at = flaky.commits
        flaky.fail_commits = 1
        clock.now += 100
        await wait_for_renewal(lease, session, clock.now)
        assert flaky.commits >= failed_at + 2 and lease.lost is None
    finally:
        lease.stop_heartbeat()


async def test_stopping_the_heartbeat_stops_the_renewals(
    session: Session, beats: HeldTimers
) -> None:
    clock = Clock()
    flaky = Flaky(session)
    lease = await acquire_lease(flaky, "op1", "A", ttl=60, clock=clock)  # type: ignore[arg-type]
    before = asyncio.all_tasks()
    commits = flaky.commits
    lease.start_heartbeat()
    lease.start_heartbeat()  # already beating: no second beat
    assert len(beats.pending()) == 1
    for n in (1, 2):
        clock.now += 20
        beats.fire()
        lease.start_heartbeat()  # a renewal in flight is beating too
        await settle_until(lambda: len(beats.pending()) == 1)
        held = await read_lease(session, "op1")
        assert held is not None and held.heartbeat == clock.now
        assert flaky.commits == commits + n  # one renewal per beat, never two
    # Stopped between beats: the pending beat is cancelled, no task is left.
    lease.stop_heartbeat()
    assert beats.pending() == [] and asyncio.all_tasks() == before
    # Stopped during a renewal: the renewal is cancelled and no next beat follows.
    lease.start_heartbeat()
    renewed_at = clock.now
    clock.now += 20
    held_up = asyncio.Event()
    flaky.before_commit = held_up.wait
    beats.fire()
    await settle_until(lambda: flaky.before_commit is None)  # the renewal is waiting
    lease.stop_heartbeat()
    await settle_until(lambda: asyncio.all_tasks() == before)
    for _ in range(5):
        await asyncio.sleep(0)
    assert beats.pending() == [] and flaky.commits == commits + 3
    held = await read_lease(session, "op1")
    assert held is not None and held.heartbeat == renewed_at  # the cancelled one wrote nothing
    assert len(beats.asked) == 4


async def test_a_fenced_heartbeat_stops_and_keeps_the_loss(
    session: Session, beats: HeldTimers
) -> None:
    clock = Clock()
    a = await acquire_lease(session, "op1", "A", ttl=0.03, clock=clock)
    before = asyncio.all_tasks()
    a.start_heartbeat()
    try:
        clock.now += 100
        await acquire_lease(session, "op1", "B", ttl=5, clock=clock)
        beats.fire()
        await settle_until(lambda: a.lost is not None and asyncio.all_tasks() == before)
        assert isinstance(a.lost, FencedError) and a.lost.holder == "B"
        for _ in range(5):
            await asyncio.sleep(0)
        assert beats.pending() == [] and len(beats.asked) == 1  # no beat after the loss
    finally:
        a.stop_heartbeat()


async def test_a_lease_taken_first_by_another_host_names_the_winner(session: Session) -> None:
    clock = Clock()
    await acquire_lease(session, "op1", "A", ttl=5, clock=clock)
    with pytest.raises(LeaseHeldError) as info:
        await acquire_lease(session, "op1", "B", ttl=5, clock=clock)
    assert (info.value.holder, info.value.expires) == ("A", clock.now + 5)
    assert str(info.value) == (
        "operation 'op1' is held by host 'A' (token 1) for another 5.0 s; it is running there"
    )
    assert info.value.operation_id == "op1"


async def test_a_settled_operation_cannot_be_leased_again(session: Session) -> None:
    lease = await acquire_lease(session, "op1", "A", ttl=0.5)  # a ttl under a second is fine
    await lease.commit(lease.release_writes())
    with pytest.raises(LeaseHeldError) as info:
        await acquire_lease(session, "op1", "B")
    assert str(info.value) == (
        "operation 'op1' has already settled (fencing token 1); there is nothing to resume"
    )
    assert (info.value.operation_id, info.value.holder, info.value.expires) == ("op1", "", 0.0)


async def test_a_token_that_is_not_one_is_refused_and_left_alone(session: Session) -> None:
    await session.commit([set_value(value("lease.token", "op1"), "seven")])
    with pytest.raises(DurabilityError) as info:
        await acquire_lease(session, "op1", "A")
    assert str(info.value) == (
        f"{value('lease.token', 'op1')} holds 'seven', not a fencing token; "
        "the session was written by something else"
    )
    assert await session.get_value(value("lease.token", "op1")) == "seven"


async def test_losing_the_race_for_a_new_operation_names_the_winner(session: Session) -> None:
    clock = Clock()
    flaky = Flaky(session)
    # A takes the new operation just before B's commit: B's commit (conditional on no
    # token) conflicts, and B is told who runs it.
    flaky.before_commit = lambda: acquire_lease(session, "op1", "A", ttl=5, clock=clock)
    with pytest.raises(LeaseHeldError) as info:
        await acquire_lease(flaky, "op1", "B", ttl=5, clock=clock)  # type: ignore[arg-type]
    assert str(info.value) == (
        "operation 'op1' is held by host 'A' (token 1) for another 5.0 s; it is running there"
    )
    assert (info.value.operation_id, info.value.holder) == ("op1", "A")
    held = await read_lease(session, "op1")
    assert held is not None and (held.owner, held.token) == ("A", 1)


async def test_losing_the_race_for_an_expired_lease_names_the_winner(session: Session) -> None:
    clock = Clock()
    await acquire_lease(session, "op1", "C", ttl=5, clock=clock)
    clock.now += 6  # C's lease expired: B and A both take the operation over
    flaky = Flaky(session)

    async def then_a_takes_it() -> None:
        # B's first commit (as if the operation were new) conflicts on C's token; B
        # then reads the expired lease, and A takes it over before B's second commit.
        flaky.before_commit = lambda: acquire_lease(session, "op1", "A", ttl=5, clock=clock)

    flaky.before_commit = then_a_takes_it
    with pytest.raises(LeaseHeldError) as info:
        await acquire_lease(flaky, "op1", "B", ttl=5, clock=clock)  # type: ignore[arg-type]
    assert str(info.value) == (
        "operation 'op1' was taken by host 'A' first (token 2); "
        "two hosts never resume the same operation"
    )
    assert (info.value.operation_id, info.value.holder) == ("op1", "A")
    assert info.value.expires == clock.now + 5
    held = await read_lease(session, "op1")
    assert held is not None and (held.owner, held.token) == ("A", 2)


async def test_losing_the_race_to_a_host_that_already_settled(session: Session) -> None:
    clock = Clock()
    flaky = Flaky(session)

    async def take_and_settle() -> None:
        lease = await acquire_lease(session, "op1", "A", ttl=5, clock=clock)
        await lease.commit(lease.release_writes())

    # A new operation, taken and settled by A before B's commit.
    flaky.before_commit = take_and_settle
    with pytest.raises(LeaseHeldError) as info:
        await acquire_lease(flaky, "op1", "B", ttl=5, clock=clock)  # type: ignore[arg-type]
    assert str(info.value) == (
        "operation 'op1' has already settled (fencing token 1); there is nothing to resume"
    )
    # An expired lease B read as free, taken and settled by A before B's second commit.
    await acquire_lease(session, "op2", "C", ttl=5, clock=clock)
    clock.now += 6

    async def then_take_and_settle() -> None:
        async def take_and_settle_op2() -> None:
            lease = await acquire_lease(session, "op2", "A", ttl=5, clock=clock)
            await lease.commit(lease.release_writes())

        flaky.before_commit = take_and_settle_op2

    flaky.before_commit = then_take_and_settle
    with pytest.raises(LeaseHeldError) as info:
        await acquire_lease(flaky, "op2", "B", ttl=5, clock=clock)  # type: ignore[arg-type]
    assert str(info.value) == (
        "operation 'op2' was taken by host '(unknown)' first (token {'settled': 2}); "
        "two hosts never resume the same operation"
    )
    assert (info.value.operation_id, info.value.holder, info.value.expires) == ("op2", "", 0.0)


async def test_the_heartbeat_renews_every_third_of_the_ttl(
    session: Session, beats: HeldTimers
) -> None:
    # The interval is what keeps a live host's lease from lapsing between two beats; it
    # is read from the timer the heartbeat asks for, not measured.
    lease = await acquire_lease(session, "op1", "A", ttl=9)
    lease.start_heartbeat()
    try:
        beats.fire()
        await settle_until(lambda: len(beats.asked) == 2)
    finally:
        lease.stop_heartbeat()
    assert beats.delays == [3.0, 3.0]


async def test_a_new_operation_is_leased_in_one_commit_without_a_read(session: Session) -> None:
    # Every call takes a lease on a new operation: one conditional commit, no read first.
    flaky = Flaky(session)
    flaky.fail_reads = 1  # a read would raise
    lease = await acquire_lease(flaky, "op1", "A", ttl=5)  # type: ignore[arg-type]
    assert flaky.commits == 1 and lease.token == 1
    held = await read_lease(session, "op1")
    assert held is not None and (held.owner, held.token) == ("A", 1)
