"""Leases and fencing tokens: which host runs an operation, and proof that it still does.

An operation (one harness run of calls) that is leased has two session-scope values:

- ``lease.token/<operation>``: its fencing token, an integer that only grows. Taking the
  operation (starting it, or taking it over after its holder's lease expired) is ONE
  conditional commit: "set the token to t + 1, if it is still t". Two hosts racing to
  take over the same operation both expect t; the database serialises them and exactly
  one commit succeeds, the other gets a conflict.
- ``lease.holder/<operation>``: ``{"owner", "token", "expires", "heartbeat"}``, renewed
  by the holder's heartbeat (also conditional on the token).

Every durable write of a leased operation (checkpoints, memos, settlement) is committed
with the precondition "the token is still mine" (``storage.expect``), checked inside the
commit's transaction. A host that was paused or partitioned past its lease and lost the
operation therefore cannot write anything after the takeover: its commit raises
:class:`FencedError` and writes nothing. Settlement deletes the holder and turns the
token into the tombstone ``{"settled": token}`` in the same transaction as the result
entry, so no later claim can take a settled operation.

Expiry is wall-clock time (``time.time``) compared across hosts: hosts are assumed to
keep their clocks within a small fraction of the lease (NTP); see docs/durability.md.
Fencing does not depend on clocks — only when a takeover is *allowed* does.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from toolfold._host import hostname
from toolfold.storage import (
    CommitResult,
    ConflictError,
    EphemeralWrite,
    Expect,
    SessionScope,
    SessionWrite,
    ValueAddress,
    Write,
    delete_value,
    expect,
    set_value,
    value,
)

from ._errors import DurabilityError, FencedError, LeaseHeldError

if TYPE_CHECKING:
    import asyncio

    from toolfold.storage import Session

    from ._lease_info import LeaseInfo

#: Lease length in seconds: how long a host may go silent before another may take over
#: its operations. The heartbeat renews it every third of that.
DEFAULT_LEASE_TTL: Final = 10.0


def default_host_id() -> str:
    """This process's host id when none is configured: ``hostname:pid`` (a restarted
    process is another host: it takes its old operations over once their lease expired)."""
    return f"{hostname()}:{os.getpid()}"


def lease_token(operation_id: str) -> ValueAddress[SessionScope]:
    """The fencing token of a leased operation (session scope, an int)."""
    return value("lease.token", operation_id)


def lease_holder(operation_id: str) -> ValueAddress[SessionScope]:
    """Who holds a leased operation, until when (session scope)."""
    return value("lease.holder", operation_id)


def lease_info(data: Any) -> LeaseInfo | None:
    """A stored ``lease.holder`` value as a :class:`LeaseInfo` (``None``: none, or not ours)."""
    if not isinstance(data, dict):
        return None
    # Defined on first use: a call that runs and settles never reads a lease back.
    from ._lease_info import LeaseInfo

    try:
        return LeaseInfo(
            str(data["owner"]),
            int(data["token"]),
            float(data["expires"]),
            float(data["heartbeat"]),
        )
    except (KeyError, TypeError, ValueError):
        return None


async def read_lease(session: Session, operation_id: str) -> LeaseInfo | None:
    """The operation's lease, or ``None`` if it is not leased (or its record is not ours)."""
    return lease_info(await session.get_value(lease_holder(operation_id)))


class LeaseTerms:
    """What a lease on one operation writes, whoever commits it (the asyncio
    :class:`Lease`, or ``toolfold run``'s direct path, which commits in line): its
    fencing token's precondition, the holder record of a renewal, the writes that take
    it and those that end it."""

    def __init__(
        self, operation_id: str, owner: str, token: int, *, ttl: float, clock: Callable[[], float]
    ) -> None:
        self.operation_id = operation_id
        self.owner = owner
        self.token = token
        self.ttl = ttl
        self.clock = clock

    def expects(self) -> list[Expect]:
        """The precondition every write of the operation is committed with."""
        return [expect(lease_token(self.operation_id), self.token)]

    def holder_record(self) -> dict[str, Any]:
        """The ``lease.holder`` value for a renewal now."""
        now = self.clock()
        return {
            "owner": self.owner,
            "token": self.token,
            "expires": now + self.ttl,
            "heartbeat": now,
        }

    def take_writes(
        self, with_writes: Sequence[SessionWrite] = ()
    ) -> tuple[list[SessionWrite], Expect]:
        """The conditional commit that takes the lease with this token: the token and
        the holder (+ ``with_writes``), on the precondition that the stored token is
        still the one before it (none, for token 1: a new operation)."""
        op = self.operation_id
        before = None if self.token == 1 else self.token - 1
        writes = [
            set_value(lease_token(op), self.token),
            set_value(lease_holder(op), self.holder_record()),
            *with_writes,
        ]
        return writes, expect(lease_token(op), before)

    def renew_writes(self) -> list[Write]:
        """A heartbeat's write: the expiry one ``ttl`` ahead."""
        return [set_value(lease_holder(self.operation_id), self.holder_record())]

    def release_writes(self) -> list[Write]:
        """The writes that end the lease (committed with the settlement): the holder goes,
        the token becomes the tombstone ``{"settled": token}``. Deleting the token would
        let a resumer that listed the operation as pending just before the settlement
        take a fresh lease on it and settle it twice; the tombstone makes that claim's
        conditional commit fail instead."""
        return [
            set_value(lease_token(self.operation_id), {"settled": self.token}),
            delete_value(lease_holder(self.operation_id)),
        ]

    def fenced(self, exc: ConflictError, holder: LeaseInfo | None) -> FencedError:
        """The :class:`FencedError` for a write of ours refused by ``exc`` (``holder``:
        the lease as stored now)."""
        owner = None if holder is None else holder.owner
        return FencedError(
            f"write of operation {self.operation_id!r} by host {self.owner!r} refused: it "
            f"carries fencing token {self.token}, but the stored token is {exc.found!r} "
            f"(held by {owner or 'nobody: settled'}); this host lost its lease and must "
            "stop working on the operation",
            operation_id=self.operation_id,
            owner=self.owner,
            token=self.token,
            current_token=exc.found,
            holder=owner,
            conflict=exc,
        )


class Lease(LeaseTerms):
    """A lease this host holds on one operation: the fencing token its writes carry."""

    def __init__(
        self,
        session: Session,
        operation_id: str,
        owner: str,
        token: int,
        *,
        ttl: float,
        clock: Callable[[], float],
    ) -> None:
        super().__init__(operation_id, owner, token, ttl=ttl, clock=clock)
        self.session = session
        # The heartbeat is a timer between beats; a renewal task exists only while a
        # renewal is in flight (most calls end long before the first beat is due).
        self._beat_timer: asyncio.TimerHandle | None = None
        self._renewal: asyncio.Task[None] | None = None
        #: Set once a write or a heartbeat found the operation taken over.
        self.lost: FencedError | None = None

    async def commit(self, writes: Sequence[Write] | Callable[[], Sequence[Write]]) -> CommitResult:
        """``session.commit(writes)`` fenced by this lease's token: raises
        :class:`FencedError` (nothing written) if another host took the operation over."""
        if self.lost is not None:
            raise self.lost
        try:
            return await self.session.commit(writes, expect=self.expects())
        except ConflictError as exc:
            if isinstance(exc, FencedError):
                raise
            self.lost = await self._fenced(exc)
            self.stop_heartbeat()
            raise self.lost from None

    async def _fenced(self, exc: ConflictError) -> FencedError:
        now_holder: LeaseInfo | None = None
        with contextlib.suppress(Exception):
            now_holder = await read_lease(self.session, self.operation_id)
        return self.fenced(exc, now_holder)

    async def renew(self) -> None:
        """Heartbeat: push the expiry one ``ttl`` ahead (fenced like any write)."""
        await self.commit(self.renew_writes())

    def start_heartbeat(self) -> None:
        """Renew every ``ttl / 3`` until :meth:`stop_heartbeat`: a loop timer that starts a
        renewal task only when a renewal is due. Starting it again while it beats does
        nothing."""
        if self._beat_timer is not None or (self._renewal is not None and not self._renewal.done()):
            return
        self._schedule_beat()

    def stop_heartbeat(self) -> None:
        """Stop renewing (the lease then expires unless released): cancels the pending
        beat and a renewal in flight (unless called from that renewal itself)."""
        timer, self._beat_timer = self._beat_timer, None
        if timer is not None:
            timer.cancel()
        task, self._renewal = self._renewal, None
        import asyncio  # here, not at the top: the lease's writes are planned without it

        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def _schedule_beat(self) -> None:
        import asyncio

        self._beat_timer = asyncio.get_running_loop().call_later(self.ttl / 3, self._beat_due)

    def _beat_due(self) -> None:
        self._beat_timer = None
        import asyncio

        self._renewal = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        import asyncio

        try:
            await self.renew()
        except FencedError:
            # ``lost`` is set: the next write raises it; the heartbeat stops here.
            if self._renewal is asyncio.current_task():
                self._renewal = None
            return
        except Exception:
            pass  # a storage hiccup is not a lost lease: try again at the next beat
        if self._renewal is asyncio.current_task():  # not stopped meanwhile
            self._renewal = None
            self._schedule_beat()


async def acquire_lease(
    session: Session,
    operation_id: str,
    owner: str,
    *,
    ttl: float = DEFAULT_LEASE_TTL,
    clock: Callable[[], float] = time.time,
    with_writes: Sequence[SessionWrite] = (),
    scope_writes: Sequence[EphemeralWrite] = (),
) -> Lease:
    """Take the operation's lease for ``owner``: a new one or an expired one (whoever
    held it). One conditional commit bumps the fencing
    token, so of two hosts taking the same operation over exactly one wins; the other
    gets :class:`LeaseHeldError`, as does any host while the lease is live elsewhere.
    ``with_writes`` (session scope) are committed in the same transaction, or not at
    all; so are ``scope_writes`` (one ephemeral scope: the operation's start), through
    ``Session.commit_across``."""
    if not isinstance(owner, str) or not owner:
        raise DurabilityError(f"a lease owner must be a non-empty host id, got {owner!r}")
    if not ttl > 0:
        raise DurabilityError(f"lease ttl must be > 0 seconds, got {ttl!r}")
    # A new operation (every call's case) has no token yet: its lease is taken by one
    # commit conditional on that, without reading first (a store round trip fewer per
    # call). The conditional commit is the same one the read would lead to; a token
    # already there fails it, writing nothing, and the read below decides.
    fresh = Lease(session, operation_id, owner, 1, ttl=ttl, clock=clock)
    try:
        await _commit(session, *fresh.take_writes(with_writes), scope_writes)
        return fresh
    except ConflictError:
        pass
    current = await session.get_value(lease_token(operation_id))
    if isinstance(current, dict) and "settled" in current:
        raise LeaseHeldError(
            f"operation {operation_id!r} has already settled (fencing token "
            f"{current['settled']!r}); there is nothing to resume",
            operation_id=operation_id,
            holder="",
            expires=0.0,
        )
    if current is not None and not isinstance(current, int):
        raise DurabilityError(
            f"{lease_token(operation_id)} holds {current!r}, not a fencing token; "
            "the session was written by something else"
        )
    # The holder is written with the token and never without it: no token (a new
    # operation, every call's case) means no holder, and one read fewer per call.
    held = None if current is None else await read_lease(session, operation_id)
    now = clock()
    # Live is live, whoever holds it: a janitor on the holder's own host must not
    # resume what that host is running (a restarted host waits out its old lease).
    if held is not None and held.live(now):
        raise LeaseHeldError(
            f"operation {operation_id!r} is held by host {held.owner!r} (token "
            f"{held.token}) for another {held.expires - now:.1f} s; it is running there",
            operation_id=operation_id,
            holder=held.owner,
            expires=held.expires,
        )
    token = (current or 0) + 1
    lease = Lease(session, operation_id, owner, token, ttl=ttl, clock=clock)
    try:
        await _commit(session, *lease.take_writes(with_writes), scope_writes)
    except ConflictError as exc:
        winner = await read_lease(session, operation_id)
        raise LeaseHeldError(
            f"operation {operation_id!r} was taken by host "
            f"{winner.owner if winner else '(unknown)'!r} first (token {exc.found!r}); "
            "two hosts never resume the same operation",
            operation_id=operation_id,
            holder=winner.owner if winner else "",
            expires=winner.expires if winner else 0.0,
        ) from None
    return lease


async def _commit(
    session: Session,
    writes: list[SessionWrite],
    precondition: Expect,
    scope_writes: Sequence[EphemeralWrite],
) -> None:
    """The lease's conditional commit, with the operation's start when there is one."""
    if scope_writes:
        await session.commit_across(writes, scope_writes, expect=[precondition])
    else:
        await session.commit(writes, expect=[precondition])
