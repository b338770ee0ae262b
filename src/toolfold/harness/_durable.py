"""Durable op streams: paced checkpoints, recovery, atomic memos, settlement and resume."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, cast

import orjson

from toolfold.chord import ChordError, Decoder, Encoder, Tracker, apply, is_base
from toolfold.output import OutputPolicy, ToolOutput, ToolOutputState
from toolfold.storage import (
    AppendList,
    EphemeralScope,
    ListAddress,
    Session,
    StorageError,
    ValueAddress,
    Write,
    append_entry,
    append_list,
    delete_value,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)

from ._context import MISSING, ToolContext
from ._errors import HarnessError
from ._execute import CallInfo, ExecutionHooks, Harness, ToolCall
from ._result import INTERRUPTION_MARKER, ToolResult
from .events import RunEnd, RunStart, ToolEnd, ToolSettled, ToolStart, ToolUpdate

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DEFAULT_REBASE_EVERY",
    "CallRecord",
    "Durability",
    "DurabilityError",
    "DurableHooks",
    "DurableInvocation",
    "DurableOperation",
    "DurableStream",
    "MemoError",
    "OpSource",
    "PendingOperation",
    "RecoveredStream",
    "RecoveryError",
    "TrackerSource",
    "commit_memo",
    "decode_base",
    "load_memo_seed",
    "operation_call",
    "operation_memo_seed",
    "operation_meta",
    "operation_tool_memo",
    "pending_assistant_output",
    "pending_tool_output",
    "recover",
    "resume",
    "settle_writes",
    "validate_memo_name",
]

JSON = Any

#: Ordinary (paced) checkpoints are committed at most this often, and only when the
#: stream is dirty. Measured in ``benchmarks/bench_durability.py``: see
#: ``docs/durability.md`` for why 1 s.
DEFAULT_CHECKPOINT_INTERVAL: Final = 1.0

#: Every Nth durable batch is a base batch, so recovery replays at most N - 1 deltas.
DEFAULT_REBASE_EVERY: Final = 50

#: Page size for reading a durable list backwards during recovery.
RECOVERY_PAGE: Final = 64

_MEMO_NAME = re.compile(r"[A-Za-z0-9_.\-/]{1,128}")


class DurabilityError(HarnessError):
    """Root of every error the durable layer raises."""


class RecoveryError(DurabilityError):
    """A durable stream cannot be folded back into a value (no base batch, bad batch)."""


class MemoError(DurabilityError, ValueError):
    """A memo call that cannot be honoured: bad name, no durable session, settled call."""


# --------------------------------------------------------------------------- addresses


def pending_tool_output(operation_id: str, invocation_id: str) -> ListAddress[EphemeralScope]:
    """The durable op stream of one tool invocation (``list[WireOp[]]``, operation scope)."""
    return list_address(
        "pending.tool_output", f"{operation_id}:{invocation_id}", ephemeral_scope(operation_id)
    )


def pending_assistant_output(operation_id: str, entry_id: str) -> ListAddress[EphemeralScope]:
    """The durable op stream of one assistant message being generated (operation scope)."""
    return list_address(
        "pending.assistant_output", f"{operation_id}:{entry_id}", ephemeral_scope(operation_id)
    )


def operation_tool_memo(
    operation_id: str, invocation_id: str, name: str
) -> ValueAddress[EphemeralScope]:
    """A tool's memo ``name`` for one invocation; in the operation scope so that it can
    commit in one transaction with the invocation's output checkpoint."""
    return value(
        "op.tool_memo", f"{operation_id}:{invocation_id}:{name}", ephemeral_scope(operation_id)
    )


def operation_memo_seed(operation_id: str, invocation_id: str) -> ValueAddress[EphemeralScope]:
    """The base batch committed with the invocation's latest memo (its replay seed)."""
    return value(
        "op.tool_memo_seed", f"{operation_id}:{invocation_id}", ephemeral_scope(operation_id)
    )


def operation_call(operation_id: str, invocation_id: str) -> ValueAddress[EphemeralScope]:
    """What a resuming harness needs to re-run or settle one call (name, args, ids)."""
    return value("op.calls", f"{operation_id}:{invocation_id}", ephemeral_scope(operation_id))


def operation_meta(operation_id: str) -> ValueAddress[EphemeralScope]:
    """Operation-level metadata (run id, the session seq the operation started after)."""
    return value("op.meta", operation_id, ephemeral_scope(operation_id))


def validate_memo_name(name: object) -> str:
    """Return ``name`` if it is a valid memo name, else raise :class:`MemoError`."""
    if not isinstance(name, str) or _MEMO_NAME.fullmatch(name) is None:
        raise MemoError(
            f"invalid memo name {name!r}: use 1-128 characters from A-Z a-z 0-9 _ . - /"
        )
    return name


# --------------------------------------------------------------------------- streams


class OpSource(Protocol):
    """Where a durable stream takes its ops from: one independent op stream of a tracked
    value (``ToolOutput.open_stream()`` returns one)."""

    def take(self) -> list[Any]:
        """Ops since this stream's last take (the first take is a base batch)."""
        ...

    def rebase(self) -> None:
        """Make the next take a base batch ``[["r", state]]``."""
        ...

    @property
    def dirty(self) -> bool:
        """Whether :meth:`take` would return ops."""
        ...


class TrackerSource:
    """An :class:`OpSource` over a bare Chord ``Tracker`` (e.g. an assistant message being
    generated), for a value with a single consumer: ``take`` is the tracker's flush."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker

    def take(self) -> list[Any]:
        """The tracker's pending ops (the first flush is a base batch)."""
        return self.tracker.flush()

    def rebase(self) -> None:
        """Make the next take a base batch."""
        self.tracker.rebase()

    @property
    def dirty(self) -> bool:
        """Whether the tracker has pending changes."""
        return bool(self.tracker.dirty)


@dataclass
class StreamStats:
    """Counters of one durable stream (for tests, benchmarks and docs)."""

    batches: int = 0
    bases: int = 0
    bytes: int = 0
    skipped_paced: int = 0
    failed: int = 0


class DurableStream:
    """Appends a tracked value's op batches to a storage list, one encoded batch per write.

    - :meth:`checkpoint` is the ordinary, paced write: at most once per ``interval``
      seconds, and only when the source is dirty.
    - :meth:`force` bypasses pacing (terminal settlement, explicit recovery bases); the
      payload stays bounded by whatever bounds the source's state (the sink's caps).
    - Every ``rebase_every``-th durable batch is a base batch, so recovery replays at most
      ``rebase_every - 1`` deltas after a base, by policy rather than by accident.

    The payload of every write is computed by :meth:`plan` **inside the session line**
    (``session.commit(callable)``), when the write executes, never when it is requested:
    a slow write requested at T1 cannot land after a write taken at T2 and overwrite
    newer state with older. All encoder state is touched only there.
    """

    def __init__(
        self,
        session: Session,
        address: ListAddress[Any],
        source: OpSource,
        *,
        interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        rebase_every: int = DEFAULT_REBASE_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rebase_every < 1:
            raise ValueError(f"rebase_every must be >= 1, got {rebase_every!r}")
        if interval < 0:
            raise ValueError(f"interval must be >= 0 seconds, got {interval!r}")
        self.session = session
        self.address = address
        self.source = source
        self.interval = interval
        self.rebase_every = rebase_every
        self._clock = clock
        self._encoder = Encoder()
        self._since_base = 0
        self._need_base = False
        self._last_write: float | None = None
        self._fenced = False
        self._timer: asyncio.Task[None] | None = None
        self.stats = StreamStats()

    # -- the payload, evaluated inside the session line ---------------------------------

    def plan(self, *, base: bool = False) -> list[Write]:
        """Take the source's pending ops and return the write that makes them durable
        (``[]`` when there is nothing to write or the stream is fenced).

        Call this only from inside the session line (as or within a commit callable):
        it advances the encoder.
        """
        write = self.plan_batch(base=base)
        return [] if write is None else [write]

    def plan_batch(self, *, base: bool = False) -> AppendList[Any] | None:
        """Like :meth:`plan`, returning the one ``AppendList`` write or ``None``."""
        if self._fenced:
            return None
        if base or self._need_base or self._since_base >= self.rebase_every - 1:
            self.source.rebase()
        ops = self.source.take()
        if not ops:
            return None
        if is_base(ops):
            # A base batch resets both codec tables: whatever came before is not needed
            # to decode what follows, which is what makes tail recovery possible.
            self._encoder = Encoder()
            self._since_base = 0
            self._need_base = False
            self.stats.bases += 1
        else:
            self._since_base += 1
        wire = self._encoder.encode(ops)
        self.stats.batches += 1
        self._last_write = self._clock()
        return append_list(self.address, wire, tag="base" if is_base(ops) else None)

    def _lost(self) -> None:
        # A commit that failed took ops from the source and advanced the encoder without
        # making them durable: the next durable batch must stand alone.
        self._need_base = True
        self.stats.failed += 1

    # -- writes --------------------------------------------------------------------------

    def due(self) -> bool:
        """Whether an ordinary checkpoint would write now (dirty and pacing allows)."""
        if self._fenced or not self.source.dirty:
            return False
        return self._last_write is None or self._clock() - self._last_write >= self.interval

    async def checkpoint(self) -> bool:
        """Ordinary checkpoint: write if dirty and at least ``interval`` has passed since
        the last durable write. Best effort: a storage failure is counted and the next
        write becomes a base batch. Returns whether a batch was committed."""
        if not self.due():
            self.stats.skipped_paced += 1
            return False
        return await self._commit(base=False, swallow=True)

    async def force(self, *, base: bool = False) -> bool:
        """Forced write: bypasses pacing (terminal settlement, recovery bases). Errors
        propagate. Returns whether a batch was committed."""
        return await self._commit(base=base, swallow=False)

    async def _commit(self, *, base: bool, swallow: bool) -> bool:
        if self._fenced:
            return False
        try:
            result = await self.session.commit(lambda: self.plan(base=base))
        except (StorageError, OSError):
            self._lost()
            if swallow:
                return False
            raise
        except BaseException:
            self._lost()
            raise
        return bool(result.seqs)

    def notify(self) -> None:
        """The source changed: make sure an ordinary checkpoint follows, paced.

        Starts (at most one) trailing timer task that checkpoints once the interval since
        the last durable write has passed, so the final state of a burst is not left
        waiting for the next change. Needs a running event loop.
        """
        if self._fenced or (self._timer is not None and not self._timer.done()):
            return
        self._timer = asyncio.get_running_loop().create_task(self._trailing())

    async def _trailing(self) -> None:
        # Loops until the source is clean: changes made while a checkpoint was in flight
        # found this task still running (notify() did nothing), so it must pick them up.
        while not self._fenced and self.source.dirty:
            wait = 0.0
            if self._last_write is not None:
                wait = self._last_write + self.interval - self._clock()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            failed = self.stats.failed
            if not await self.checkpoint() and self.stats.failed == failed:
                return  # dirty, yet nothing to write: the next change notifies again

    def fence(self) -> None:
        """Refuse every later write, including ones already queued on the session line.

        Called before an invocation is settled: late progress (a stray task still writing
        to the sink, a timer) must not append to the pending list once the operation scope
        is retired, because a write after retirement would start a new lifetime of the
        scope and recreate pending output nobody will ever settle.
        """
        self._fenced = True
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()

    @property
    def fenced(self) -> bool:
        """Whether :meth:`fence` was called."""
        return self._fenced

    async def aclose(self) -> None:
        """Fence and wait for the trailing timer to finish."""
        timer = self._timer
        self.fence()
        if timer is not None:
            # The timer only ever ran best-effort checkpoints; whatever ended it, the
            # caller's own forced write (or settlement) is what counts now.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await timer


# --------------------------------------------------------------------------- recovery


@dataclass(frozen=True)
class RecoveredStream:
    """The value of a durable stream as of its last durable batch."""

    value: JSON
    batches: int
    """How many batches were decoded (the base batch plus the deltas after it)."""
    base_seq: int
    last_seq: int


async def recover(
    session: Session, address: ListAddress[Any], *, page: int = RECOVERY_PAGE
) -> RecoveredStream | None:
    """Fold a durable stream back into its value; ``None`` if nothing was ever written.

    Reads the list backwards, a page at a time, stopping at the latest base batch
    (``stop_at_tag="base"``), then decodes forward with a **fresh** decoder and applies.
    No tool code runs: only the six-verb applier, so a tool rewritten between crash and
    resume cannot make a persisted stream unreadable.
    """
    tail: list[Any] = []
    cursor: int | None = None
    while True:
        chunk = await session.read_list(
            address, cursor=cursor, order="desc", limit=page, stop_at_tag="base"
        )
        tail.extend(chunk)
        if not chunk or chunk[-1].tag == "base" or len(chunk) < page:
            break
        cursor = chunk[-1].seq
    if not tail:
        return None
    if tail[-1].tag != "base":
        raise RecoveryError(
            f"{address} holds {len(tail)} batches but no base batch; the stream's first "
            "durable batch must be a base batch — the list was written by something else "
            "or truncated at the front"
        )
    decoder = Decoder()
    state: JSON = None
    for element in reversed(tail):
        try:
            state = apply(state, decoder.decode(element.value))
        except ChordError as exc:
            raise RecoveryError(
                f"cannot fold batch seq {element.seq} of {address}: {exc}; the stream is "
                "corrupt after its last base batch"
            ) from exc
    return RecoveredStream(state, len(tail), tail[-1].seq, tail[0].seq)


def decode_base(wire: JSON, where: str) -> JSON:
    """Decode one stored base batch into its value."""
    if not isinstance(wire, list) or not is_base(wire):
        raise RecoveryError(f"{where} does not hold a base batch (got {str(wire)[:80]!r})")
    try:
        return apply(None, Decoder().decode(wire))
    except ChordError as exc:
        raise RecoveryError(f"cannot decode the base batch in {where}: {exc}") from exc


async def load_memo_seed(session: Session, operation_id: str, invocation_id: str) -> JSON:
    """The invocation's state as committed with its latest memo, or ``None`` if it never
    memoised (a replay then starts from scratch)."""
    address = operation_memo_seed(operation_id, invocation_id)
    wire = await session.get_value(address)
    if wire is None:
        return None
    return decode_base(wire, str(address))


# --------------------------------------------------------------------------- memos


async def commit_memo(
    stream: DurableStream,
    operation_id: str,
    invocation_id: str,
    name: str,
    memo: JSON,
) -> None:
    """Commit ``[set/delete memo, base-batch checkpoint, memo seed]`` in ONE transaction.

    The memo invariant: the tool did X, wrote X's output to the sink, *then*
    memoises "did X" — so the checkpoint computed here (inside the session line) already
    holds X's output. Two ordered commits would not do: memo-then-checkpoint loses X's
    output on a crash between them, checkpoint-then-memo duplicates it. Every address is
    in the operation scope, so this is one single-file transaction.
    """
    validate_memo_name(name)
    if stream.fenced:
        raise MemoError(
            f"set_memo({name!r}) after invocation {invocation_id!r} was settled; memos "
            "can only be written while the tool runs"
        )
    memo_address = operation_tool_memo(operation_id, invocation_id, name)
    seed_address = operation_memo_seed(operation_id, invocation_id)

    def plan() -> list[Write]:
        if stream.fenced:
            raise MemoError(
                f"set_memo({name!r}) raced with the settlement of invocation "
                f"{invocation_id!r}; the memo was not written"
            )
        checkpoint = stream.plan_batch(base=True)
        if checkpoint is None:
            raise MemoError(f"the output of invocation {invocation_id!r} has no state to seed")
        wire = checkpoint.element
        memo_write = (
            delete_value(memo_address)
            if memo is None or memo is MISSING
            else set_value(memo_address, memo)
        )
        return [memo_write, checkpoint, set_value(seed_address, wire)]

    try:
        await stream.session.commit(plan)
    except MemoError:
        raise
    except BaseException:
        stream._lost()
        raise


# --------------------------------------------------------------------------- settlement


def settle_writes(message: dict[str, JSON], *, retire: EphemeralScope | None = None) -> list[Write]:
    """The one session-scope transaction that settles a call: its ``ToolResultMessage``
    entry, plus the retirement of the operation scope when this is the operation's last
    call (everything pending about the operation dies with the same commit)."""
    writes: list[Write] = [append_entry(message)]
    if retire is not None:
        writes.append(retire_scope(retire))
    return writes


@dataclass
class CallRecord:
    """The durable description of one call, enough to resume it."""

    operation_id: str
    invocation_id: str
    tool_name: str
    tool_call_id: str
    args: JSON
    run_id: str
    turn_id: str
    extra: dict[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        """The stored form."""
        return {
            "operation_id": self.operation_id,
            "invocation_id": self.invocation_id,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "args": self.args,
            "run_id": self.run_id,
            "turn_id": self.turn_id,
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, data: JSON, where: str) -> CallRecord:
        """Parse the stored form; :class:`RecoveryError` naming ``where`` if malformed."""
        try:
            return cls(
                operation_id=str(data["operation_id"]),
                invocation_id=str(data["invocation_id"]),
                tool_name=str(data["tool_name"]),
                tool_call_id=str(data["tool_call_id"]),
                args=data.get("args"),
                run_id=str(data["run_id"]),
                turn_id=str(data["turn_id"]),
                extra=dict(data.get("extra") or {}),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise RecoveryError(f"malformed call record at {where}: {data!r:.120}") from exc


# --------------------------------------------------------------------------- operations


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
        """Forced terminal write of the final state (before the result is assembled)."""
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
    ) -> None:
        self.durability = durability
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
        )
        inv = DurableInvocation(self, record, stream)
        self._invocations[invocation_id] = inv
        return inv

    async def settle(self, invocation_id: str, message: dict[str, JSON]) -> None:
        """Settle one call: fence its stream, then ONE session-scope transaction with the
        result entry (+ ``retire_scope`` if it is the operation's last unsettled call)."""
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
            return settle_writes(message, retire=None if self._unsettled else self.scope)

        try:
            await self.durability.session.commit(plan)
        except BaseException:
            self._unsettled.add(invocation_id)
            raise


@dataclass(frozen=True)
class PendingOperation:
    """An operation found live (unsettled) in a session: what resume works from."""

    operation_id: str
    run_id: str
    calls: tuple[CallRecord, ...]
    settled: frozenset[str]
    """Invocation ids whose result entry is already in the transcript."""


class Durability:
    """Durable tool output for one open storage session (attach one to a ``Harness``)."""

    def __init__(
        self,
        session: Session,
        *,
        interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        rebase_every: int = DEFAULT_REBASE_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.session = session
        self.interval = interval
        self.rebase_every = rebase_every
        self.clock = clock

    async def start_operation(
        self, operation_id: str, run_id: str, records: Sequence[CallRecord]
    ) -> DurableOperation:
        """Record the operation and its calls in the operation scope (one transaction)
        before any tool runs, so a crash at any later point leaves enough to resume."""
        after = self.session.next_seq - 1
        writes: list[Write] = [
            set_value(operation_meta(operation_id), {"run_id": run_id, "after_seq": after})
        ]
        for r in records:
            if r.operation_id != operation_id:
                raise DurabilityError(
                    f"call {r.tool_call_id!r} names operation {r.operation_id!r}, not "
                    f"{operation_id!r}"
                )
            writes.append(set_value(operation_call(operation_id, r.invocation_id), r.to_json()))
        await self.session.commit(writes)
        return DurableOperation(self, operation_id, run_id, records)

    async def pending_operations(self) -> list[PendingOperation]:
        """Every live (unsettled) operation in the session, with its calls and which of
        them already settled."""
        found: list[PendingOperation] = []
        for scope in await self.session.live_scopes():
            op = scope.id
            meta = await self.session.get_value(operation_meta(op))
            if not isinstance(meta, dict):
                # A scope we did not create (or whose start never committed): not ours.
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
                PendingOperation(op, str(meta.get("run_id", op)), tuple(calls), frozenset(settled))
            )
        return found

    def reopen(self, pending: PendingOperation) -> DurableOperation:
        """A :class:`DurableOperation` for a pending one (its settled calls stay settled)."""
        return DurableOperation(
            self, pending.operation_id, pending.run_id, pending.calls, settled=pending.settled
        )


# --------------------------------------------------------------------------- harness seam


class DurableHooks(ExecutionHooks):
    """Plugs durability into the call lifecycle (``ExecutionHooks``) of a ``Harness``.

    - run start: the operation (= the run) and its calls are recorded in the operation
      scope before any tool runs;
    - sink created: a durable stream is opened on the sink (its own op stream and its
      own encoder), paced checkpoints follow the sink's changes, memos are attached
      to the tool's context;
    - before settle: a forced write of the final state, then the settlement
      transaction (result entry, + ``retire_scope`` with the operation's last call);
    - :meth:`resume`: every operation left unsettled in the session is finished —
      replay-safe calls re-run seeded, the others settled from their checkpoint.
    """

    def __init__(self, durability: Durability) -> None:
        self.durability = durability
        self._ops: dict[str, DurableOperation] = {}
        self._calls: dict[tuple[str, str], DurableInvocation] = {}
        self._seeds: dict[tuple[str, str], JSON] = {}

    @property
    def session(self) -> Session:
        """The storage session output is made durable in."""
        return self.durability.session

    async def on_run_start(
        self, run_id: str, calls: Sequence[ToolCall], *, turn_id: str = ""
    ) -> None:
        records = [CallRecord(run_id, c.id, c.name, c.id, c.args, run_id, turn_id) for c in calls]
        self._ops[run_id] = await self.durability.start_operation(run_id, run_id, records)

    async def seed_for(self, call: CallInfo) -> ToolOutputState | None:
        seed = self._seeds.pop((call.run_id, call.tool_call_id), None)
        return cast("ToolOutputState | None", seed)

    async def on_sink_created(
        self, call: CallInfo, sink: ToolOutput, context: ToolContext
    ) -> ToolContext:
        op = self._ops.get(call.run_id)
        if op is None:
            # A call outside Harness.run (no operation recorded): nothing to make
            # durable, and memos stay unavailable rather than silently volatile.
            return context
        record = op.records.get(call.tool_call_id)
        if record is not None and record.turn_id != call.turn_id:
            # A record written without the turn id (a caller of on_run_start that did
            # not pass it): keep it, so a resumed call's events carry the same identity
            # as the original's.
            record.turn_id = call.turn_id
            await self.session.commit(
                [set_value(operation_call(op.operation_id, record.invocation_id), record.to_json())]
            )
        inv = op.invocation(call.tool_call_id, sink.open_stream())
        self._calls[(call.run_id, call.tool_call_id)] = inv
        sink.on_change(inv.notify)
        inv.notify()  # the first durable batch (a base) as soon as pacing allows
        return context.with_memos(inv)

    async def before_settle(self, call: CallInfo, sink: ToolOutput, result: ToolResult) -> None:
        op = self._ops.get(call.run_id)
        if op is None:
            return
        inv = self._calls.pop((call.run_id, call.tool_call_id), None)
        if inv is not None:
            await inv.finish()
        message = result.to_message().to_json()
        message["operation_id"] = op.operation_id
        message["run_id"] = call.run_id
        message["turn_id"] = call.turn_id
        await op.settle(call.tool_call_id, message)
        if not op.unsettled:
            self._ops.pop(call.run_id, None)

    async def resume(self, harness: Harness) -> list[ToolResult]:
        """Finish every operation left unsettled in the session (after a crash).

        Replay-safe calls are re-executed with a sink **seeded** from the state that
        was committed with their latest memo (never from nothing after deleting the
        checkpoint: memoised work is skipped and emits nothing, so its output must
        already be in the sink). Calls that are not replay-safe are not re-run: their
        last durable state is settled as the result, with ``INTERRUPTION_MARKER``,
        ``is_error`` and outcome ``"interrupted"``. Returns the settled results.
        """
        results: list[ToolResult] = []
        for pending in await self.durability.pending_operations():
            results.extend(await self._resume_operation(harness, pending))
        return results

    async def _resume_operation(
        self, harness: Harness, pending: PendingOperation
    ) -> list[ToolResult]:
        op = self.durability.reopen(pending)
        run_id = pending.run_id
        self._ops[run_id] = op
        todo = [c for c in pending.calls if c.invocation_id in op.unsettled]
        harness.bus.publish(RunStart(run_id, harness.lane))
        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(self._resume_call(harness, op, c)) for c in todo]
        finally:
            if not harness.bus.closed:
                harness.bus.publish(RunEnd(run_id))
        if not todo:
            # Every call had settled but the crash came before the retirement
            # (a call settled by an older harness without the last-call retirement).
            await self.session.commit([retire_scope(op.scope)])
        return [t.result() for t in tasks]

    async def _resume_call(
        self, harness: Harness, op: DurableOperation, record: CallRecord
    ) -> ToolResult:
        tool = harness.tools.get(record.tool_name)
        key = (op.run_id, record.tool_call_id)
        turn_id = record.turn_id or "turn-1"
        if tool is not None and tool.replay_safe:
            self._seeds[key] = await load_memo_seed(
                self.session, op.operation_id, record.invocation_id
            )
            return await harness.call(
                ToolCall(record.tool_call_id, record.tool_name, record.args),
                run_id=op.run_id,
                turn_id=turn_id,
            )
        recovered = await recover(
            self.session, pending_tool_output(op.operation_id, record.invocation_id)
        )
        policy = tool.output if tool is not None else OutputPolicy()
        state = recovered.value if recovered is not None else ToolOutput(policy).snapshot()
        return await self._settle_interrupted(harness, op, record, turn_id, state)

    async def _settle_interrupted(
        self,
        harness: Harness,
        op: DurableOperation,
        record: CallRecord,
        turn_id: str,
        state: JSON,
    ) -> ToolResult:
        # The durable state IS the result: no sink is rebuilt around it (re-windowing a
        # state whose totals came from the source could change its text), nothing runs,
        # and nothing new is made durable — a crash during this settlement finds the
        # same checkpoint again, never one that already carries the marker.
        final = orjson.loads(orjson.dumps(state))
        text = final["content"][0]["text"]
        sep = "\n" if text and not text.endswith("\n") else ""
        final["content"][0]["text"] = text + sep + INTERRUPTION_MARKER
        ids = (op.run_id, turn_id, record.tool_call_id)
        bus = harness.bus
        bus.publish(ToolStart(*ids, record.tool_name, record.args))
        bus.publish(ToolUpdate(*ids, [["r", final]]))  # a base batch, like any first update
        result = ToolResult.from_state(
            cast("ToolOutputState", final),
            tool_call_id=record.tool_call_id,
            tool_name=record.tool_name,
            outcome="interrupted",
        )
        message = result.to_message().to_json()
        stored = {**message, "operation_id": op.operation_id, "run_id": op.run_id}
        stored["turn_id"] = turn_id
        try:
            await op.settle(record.invocation_id, stored)
        finally:
            bus.publish(ToolEnd(*ids, is_error=True))
        bus.publish(ToolSettled(*ids, message=message))
        return result


async def resume(harness: Harness) -> list[ToolResult]:
    """Resume every unsettled operation of the durable session attached to ``harness``
    (see :meth:`DurableHooks.resume`)."""
    hooks = harness.hooks
    if not isinstance(hooks, DurableHooks):
        raise DurabilityError(
            "resume() needs a Harness with durability attached "
            "(Harness(tools, hooks=DurableHooks(Durability(session))))"
        )
    return await hooks.resume(harness)
