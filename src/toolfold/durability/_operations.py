"""Operations and their calls: per-call durable streams, settlement that retires the
operation scope with the last call, and finding pending operations (the records of
calls are in ``_calls``, a pending operation as found in ``_pending``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from toolfold.storage import (
    CommitResult,
    EphemeralScope,
    EphemeralWrite,
    SessionWrite,
    Write,
    append_entry,
    ephemeral_scope,
    retire_scope,
    set_value,
)

from ._addresses import (
    operation_call,
    operation_meta,
    operation_tool_memo,
    pending_tool_output,
    validate_memo_name,
)
from ._calls import CallRecord
from ._errors import DurabilityError
from ._leases import DEFAULT_LEASE_TTL, Lease, LeaseTerms, acquire_lease, read_lease
from ._memos import MISSING, commit_memo
from ._stream import DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_REBASE_EVERY, DurableStream, OpSource

if TYPE_CHECKING:
    from toolfold.storage import Session

    from ._pending import PendingOperation

JSON = Any


def settle_writes(message: dict[str, JSON], *, retire: EphemeralScope | None = None) -> list[Write]:
    """The one session-scope transaction that settles a call: its ``ToolResultMessage``
    entry, plus the retirement of the operation scope when this is the operation's last
    call (everything pending about the operation dies with the same commit).

    The entry is keyed by its tool call id and carries the message without its content
    as summary, so a reader finds a call by id or position, and lists calls, without
    loading the results (see ``Session.read_entries``)."""
    call_id = message.get("tool_call_id")
    summary = {k: v for k, v in message.items() if k != "content"}
    # A key storage would refuse (NUL) must not fail the settlement: that call is just
    # not indexed.
    key = call_id if isinstance(call_id, str) and call_id and "\x00" not in call_id else None
    writes: list[Write] = [append_entry(message, key=key, summary=summary)]
    if retire is not None:
        writes.append(retire_scope(retire))
    return writes


def settlement_writes(
    message: dict[str, JSON],
    *,
    retire: EphemeralScope | None,
    with_writes: Sequence[Write] = (),
    lease: LeaseTerms | None = None,
) -> list[Write]:
    """Everything the transaction that settles a call writes: :func:`settle_writes`,
    then ``with_writes`` (what a host records about the settled call), then, when the
    call is its operation's last (``retire``) and the operation is leased, the writes
    that end its lease."""
    writes = settle_writes(message, retire=retire)
    writes.extend(with_writes)
    if retire is not None and lease is not None:
        writes.extend(lease.release_writes())  # the lease ends with the scope
    return writes


def start_writes(
    operation_id: str, run_id: str, records: Sequence[CallRecord], after_seq: int
) -> list[EphemeralWrite]:
    """What records an operation's start in its own scope: its meta (run id, and the
    session's last seq before it: where its settled entries can start) and its calls.
    :class:`DurabilityError` for a record that names another operation."""
    writes: list[EphemeralWrite] = [
        set_value(operation_meta(operation_id), {"run_id": run_id, "after_seq": after_seq})
    ]
    for r in records:
        if r.operation_id != operation_id:
            raise DurabilityError(
                f"call {r.tool_call_id!r} names operation {r.operation_id!r}, not {operation_id!r}"
            )
        writes.append(set_value(operation_call(operation_id, r.invocation_id), r.to_json()))
    return writes


def result_entry(
    message: dict[str, JSON], *, operation_id: str, run_id: str, turn_id: str, what: str
) -> dict[str, JSON]:
    """A settled call's transcript entry: its result message, and which operation, run
    and turn it settles, with a one-line description of the call (``what``)."""
    return {
        **message,
        "operation_id": operation_id,
        "run_id": run_id,
        "turn_id": turn_id,
        "what": what,
    }


class DurableInvocation:
    """One call's durable side: its checkpointed output stream and its memos."""

    def __init__(self, operation: DurableOperation, record: CallRecord, stream: DurableStream):
        self.operation = operation
        self.record = record
        self.stream = stream
        self.settled = False

    async def get_memo(self, name: str) -> JSON:
        """The memo ``name`` of this invocation, or ``MISSING`` if it was never set."""
        validate_memo_name(name)
        found = await self.stream.session.get_value(
            operation_tool_memo(self.record.operation_id, self.record.invocation_id, name)
        )
        return MISSING if found is None else found

    async def set_memo(self, name: str, memo: JSON) -> None:
        """Set memo ``name`` (``None`` or ``MISSING`` deletes it) atomically with an
        output checkpoint."""
        await commit_memo(
            self.stream, self.record.operation_id, self.record.invocation_id, name, memo
        )

    def notify(self) -> None:
        """The sink changed: schedule a paced ordinary checkpoint."""
        self.stream.notify()

    async def finish(self) -> None:
        """Forced terminal write of the final state (before the settlement).

        A call that ends before its first checkpoint was due (most calls: ``ls``,
        ``git status``) has nothing durable to bring up to date: its output goes to
        the store once, in its settlement. A crash in between loses what a crash
        during the call would (under one checkpoint interval of window output; resume
        settles it as interrupted), and nothing that was acknowledged."""
        stats = self.stream.stats
        if stats.batches == 0 and stats.failed == 0:
            return
        await self.stream.force()


class DurableOperation:
    """The durable side of one operation (one harness run): its calls, their streams,
    and the settlement that retires the operation scope with the last call."""

    def __init__(
        self,
        durability: Durability,
        operation_id: str,
        run_id: str,
        records: Sequence[CallRecord],
        *,
        settled: Collection[str] = (),
        lease: Lease | None = None,
    ) -> None:
        self.durability = durability
        #: This host's lease on the operation, when it is leased: every durable write
        #: of the operation carries its fencing token.
        self.lease = lease
        self.operation_id = operation_id
        self.run_id = run_id
        self.scope = ephemeral_scope(operation_id)
        self.records = {r.invocation_id: r for r in records}
        self._unsettled = {r.invocation_id for r in records} - set(settled)
        self._invocations: dict[str, DurableInvocation] = {}

    @property
    def unsettled(self) -> frozenset[str]:
        """Invocation ids not settled yet."""
        return frozenset(self._unsettled)

    def invocation(self, invocation_id: str, source: OpSource) -> DurableInvocation:
        """Attach ``source`` (an op stream of the call's sink) to the call's durable list."""
        record = self.records.get(invocation_id)
        if record is None:
            raise DurabilityError(
                f"invocation {invocation_id!r} is not part of operation "
                f"{self.operation_id!r}; register it with start_operation()"
            )
        d = self.durability
        stream = DurableStream(
            d.session,
            pending_tool_output(self.operation_id, invocation_id),
            source,
            interval=d.interval,
            rebase_every=d.rebase_every,
            clock=d.clock,
            lease=self.lease,
        )
        inv = DurableInvocation(self, record, stream)
        self._invocations[invocation_id] = inv
        return inv

    async def settle(
        self, invocation_id: str, message: dict[str, JSON], *, with_writes: Sequence[Write] = ()
    ) -> None:
        """Settle one call: fence its stream, then ONE session-scope transaction with the
        result entry (+ ``retire_scope`` if it is the operation's last unsettled call),
        and ``with_writes`` (session scope: what a host records about the settled call)."""
        if invocation_id not in self._unsettled:
            raise DurabilityError(
                f"invocation {invocation_id!r} of operation {self.operation_id!r} is "
                "already settled (or unknown); a call settles exactly once"
            )
        inv = self._invocations.get(invocation_id)
        if inv is not None:
            # Fence first: a late write queued behind this settlement on the session line
            # must find the stream fenced and write nothing.
            await inv.stream.aclose()
            inv.settled = True

        def plan() -> list[Write]:
            # Decided inside the session line: the settlement that runs last in line
            # order retires the scope, so every sibling's entry is committed before
            # the retirement (a crash in between cannot lose a settled sibling).
            self._unsettled.discard(invocation_id)
            last = not self._unsettled
            return settlement_writes(
                message,
                retire=self.scope if last else None,
                with_writes=with_writes,
                lease=self.lease,
            )

        try:
            await self.commit(plan)
        except BaseException:
            self._unsettled.add(invocation_id)
            raise
        if not self._unsettled and self.lease is not None:
            self.lease.stop_heartbeat()

    async def commit(self, writes: Sequence[Write] | Callable[[], Sequence[Write]]) -> CommitResult:
        """Commit writes of this operation, fenced by its lease when it is leased
        (:class:`FencedError` if another host took the operation over)."""
        if self.lease is not None:
            return await self.lease.commit(writes)
        return await self.durability.session.commit(writes)

    async def retire(self) -> None:
        """Retire the operation scope (and end its lease) when every call had settled
        but the retirement itself never committed."""
        writes: list[Write] = [retire_scope(self.scope)]
        if self.lease is not None:
            writes.extend(self.lease.release_writes())
            self.lease.stop_heartbeat()
        await self.commit(writes)


class Durability:
    """Durable tool output for one open storage session (attach one to a ``Harness``)."""

    def __init__(
        self,
        session: Session,
        *,
        interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        rebase_every: int = DEFAULT_REBASE_EVERY,
        clock: Callable[[], float] = time.monotonic,
        host: str | None = None,
        lease_ttl: float = DEFAULT_LEASE_TTL,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.session = session
        self.interval = interval
        self.rebase_every = rebase_every
        self.clock = clock
        #: This host's id. When set, every operation it starts is leased (owner = host,
        #: renewed every ``lease_ttl / 3`` s) and fenced; see ``_leases``.
        self.host = host
        self.lease_ttl = lease_ttl
        self.wall_clock = wall_clock

    async def start_operation(
        self,
        operation_id: str,
        run_id: str,
        records: Sequence[CallRecord],
        *,
        with_writes: Sequence[SessionWrite] = (),
    ) -> DurableOperation:
        """Record the operation and its calls in the operation scope before any tool
        runs, so a crash at any later point leaves enough to resume.

        ``with_writes`` (session scope: what a host records about the calls) are
        committed with it. A leased operation is started by ONE transaction that takes
        the lease, writes ``with_writes`` and records the operation
        (``Session.commit_across``): one commit and one flush, not one for the lease and
        one for the start. An operation whose lease is held elsewhere writes nothing
        (:class:`LeaseHeldError`). Unleased, ``with_writes`` go first, on their own.
        """
        writes = start_writes(operation_id, run_id, records, self.session.next_seq - 1)
        if self.host is not None:
            lease = await acquire_lease(
                self.session,
                operation_id,
                self.host,
                ttl=self.lease_ttl,
                clock=self.wall_clock,
                with_writes=with_writes,
                scope_writes=writes,
            )
            op = DurableOperation(self, operation_id, run_id, records, lease=lease)
            lease.start_heartbeat()
            return op
        if with_writes:
            await self.session.commit(list(with_writes))
        op = DurableOperation(self, operation_id, run_id, records)
        await op.commit(writes)
        return op

    async def pending_operations(self) -> list[PendingOperation]:
        """Every live (unsettled) operation in the session, with its calls and which of
        them already settled."""
        from ._pending import PendingOperation  # defined on first use: a call never builds one

        found: list[PendingOperation] = []
        for scope in await self.session.live_scopes():
            op = scope.id
            meta = await self.session.get_value(operation_meta(op))
            if not isinstance(meta, dict) or meta.get("kind") == "assistant":
                # A scope we did not create (or whose start never committed), or an
                # assistant message's (pending_messages settles those): not a call's.
                continue
            calls = [
                CallRecord.from_json(data, f"op.calls/{key}")
                for key, data in await self.session.scan_values(
                    "op.calls", f"{op}:", ephemeral_scope(op)
                )
            ]
            calls = [c for c in calls if c.operation_id == op]
            ids = {c.tool_call_id: c.invocation_id for c in calls}
            settled: set[str] = set()
            after = meta.get("after_seq")
            cursor = after if isinstance(after, int) else None
            while True:
                entries = await self.session.read_entries(cursor=cursor, limit=256)
                for entry in entries:
                    v = entry.value
                    if isinstance(v, dict) and v.get("operation_id", op) == op:
                        inv = ids.get(str(v.get("tool_call_id")))
                        if inv is not None:
                            settled.add(inv)
                if len(entries) < 256:
                    break
                cursor = entries[-1].seq
            found.append(
                PendingOperation(
                    op,
                    str(meta.get("run_id", op)),
                    tuple(calls),
                    frozenset(settled),
                    await read_lease(self.session, op),
                )
            )
        return found

    async def orphaned_operations(self) -> list[PendingOperation]:
        """The pending operations whose host died: leased, and the lease expired. These
        are what a janitor may take over; an unleased pending operation carries no sign
        of whether its process still runs."""
        now = self.wall_clock()
        return [
            p
            for p in await self.pending_operations()
            if p.lease is not None and not p.lease.live(now)
        ]

    async def claim(self, pending: PendingOperation, host: str) -> DurableOperation:
        """Take a pending operation over to resume it as ``host``: one conditional commit
        bumps its fencing token, so a host still writing under the old token is refused
        from then on, and of two hosts claiming it only one wins. Raises
        :class:`LeaseHeldError` while another host's lease on it is live."""
        lease = await acquire_lease(
            self.session, pending.operation_id, host, ttl=self.lease_ttl, clock=self.wall_clock
        )
        # ``pending`` was read before the lease was ours: its previous holder may have
        # settled more calls since. Nobody can now, so read which ones once more.
        for fresh in await self.pending_operations():
            if fresh.operation_id == pending.operation_id:
                pending = fresh
        lease.start_heartbeat()
        return DurableOperation(
            self,
            pending.operation_id,
            pending.run_id,
            pending.calls,
            settled=pending.settled,
            lease=lease,
        )

    def reopen(self, pending: PendingOperation) -> DurableOperation:
        """A :class:`DurableOperation` for a pending one (its settled calls stay settled)."""
        return DurableOperation(
            self, pending.operation_id, pending.run_id, pending.calls, settled=pending.settled
        )
