"""Paced durable op streams: one encoded Chord batch per write, periodic bases, a fence."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from toolfold import _json, _otel
from toolfold._record import record
from toolfold.chord import Encoder, Tracker, is_base
from toolfold.storage import (
    AppendList,
    CommitResult,
    ListAddress,
    StorageError,
    Write,
    append_list,
    delete_list,
)

from ._errors import FencedError

if TYPE_CHECKING:
    import asyncio

    from toolfold.storage import Session

    from ._leases import Lease

#: Ordinary (paced) checkpoints are committed at most this often, and only when the
#: stream is dirty. Measured in ``benchmarks/bench_durability.py``: see
#: ``docs/durability.md`` for why 1 s.
DEFAULT_CHECKPOINT_INTERVAL: Final = 1.0

#: Every Nth durable batch is a base batch, so recovery replays at most N - 1 deltas.
DEFAULT_REBASE_EVERY: Final = 50


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


@record
class StreamStats:
    """Counters of one durable stream (for tests, benchmarks and docs)."""

    batches: int = 0
    bases: int = 0
    bytes: int = 0
    skipped_paced: int = 0
    failed: int = 0


class StreamPlanner:
    """What a durable op stream writes, and when, whoever commits it: the paced
    checkpoints' pacing (:meth:`due`), each batch's payload (:meth:`plan`: a delta, or
    a base every ``rebase_every`` batches or once the deltas outweigh the last base),
    and the fence. :class:`DurableStream` commits its plans on asyncio; ``toolfold
    run``'s direct path commits them in line."""

    def __init__(
        self,
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
        self.address = address
        self.source = source
        self.interval = interval
        self.rebase_every = rebase_every
        self._clock = clock
        self._encoder = Encoder()
        self._since_base = 0
        # Encoded sizes of the newest base and of the deltas since: once the deltas
        # outweigh the base, the next batch is a base (recovery then reads at most about
        # two windows, and a store keeps at most that much per stream).
        self._base_bytes: int | None = None
        self._delta_bytes = 0
        self._need_base = False
        # Pacing starts when the stream opens: the first ordinary checkpoint comes once
        # the call has run for ``interval``. A call that ends sooner (most do) is written
        # once, by its terminal write; its start record is already durable, so a crash
        # before that loses at most ``interval`` of output, as between any two
        # checkpoints.
        self._opened = clock()
        self._last_write: float | None = None
        self._fenced = False
        self.stats = StreamStats()

    # -- the payload, evaluated inside the session line ---------------------------------

    def plan(self, *, base: bool = False) -> list[Write]:
        """Take the source's pending ops and return the writes that make them durable
        (``[]`` when there is nothing to write or the stream is fenced).

        A base batch is written as ``delete_list`` + ``append_list``: recovery never
        reads past the newest base, so the batches before it are dead, and dropping them
        in the same transaction keeps the list — and the pages or memory holding it —
        at one base plus the deltas since.

        Call this only from inside the session line (as or within a commit callable):
        it advances the encoder.
        """
        write = self.plan_batch(base=base)
        if write is None:
            return []
        if write.tag == "base":
            return [delete_list(self.address), write]
        return [write]

    def plan_batch(self, *, base: bool = False) -> AppendList[Any] | None:
        """Like :meth:`plan`, returning the ``AppendList`` write or ``None``."""
        if self._fenced:
            return None
        if (
            base
            or self._need_base
            or self._since_base >= self.rebase_every - 1
            or (self._base_bytes is not None and self._delta_bytes >= self._base_bytes)
        ):
            self.source.rebase()
        ops = self.source.take()
        if not ops:
            return None
        if not is_base(ops):
            wire = self._encoder.encode(ops)
            size = len(_json.dumps(wire))
            # A delta a third of a base or more: store the base instead. It costs at
            # most three times the delta, replaces everything before it (a store can
            # reuse that space in place: SQLite then copies far fewer pages from its
            # WAL), and keeps recovery to one base plus small deltas.
            if self._base_bytes is None or 3 * size < self._base_bytes:
                self._since_base += 1
                self._delta_bytes += size
                self.stats.batches += 1
                self._last_write = self._clock()
                return append_list(self.address, wire)
            self.source.rebase()
            ops = self.source.take()
        # A base batch resets both codec tables: whatever came before is not needed to
        # decode what follows, which is what makes tail recovery possible.
        self._encoder = Encoder()
        wire = self._encoder.encode(ops)
        self._since_base = 0
        self._delta_bytes = 0
        self._base_bytes = len(_json.dumps(wire))
        self._need_base = False
        self.stats.bases += 1
        self.stats.batches += 1
        self._last_write = self._clock()
        return append_list(self.address, wire, tag="base")

    def lost(self) -> None:
        """A commit of a planned batch failed: it took ops from the source and advanced
        the encoder without making them durable, so the next batch must stand alone (a
        base)."""
        self._need_base = True
        self.stats.failed += 1

    def due(self) -> bool:
        """Whether an ordinary checkpoint would write now (dirty and pacing allows)."""
        if self._fenced or not self.source.dirty:
            return False
        return self._clock() - self._paced_from() >= self.interval

    def _paced_from(self) -> float:
        return self._opened if self._last_write is None else self._last_write

    def next_due(self) -> float:
        """Seconds until an ordinary checkpoint may write (0: now)."""
        return max(0.0, self._paced_from() + self.interval - self._clock())

    def fence(self) -> None:
        """Refuse every later write."""
        self._fenced = True

    @property
    def fenced(self) -> bool:
        """Whether :meth:`fence` was called."""
        return self._fenced


class DurableStream(StreamPlanner):
    """Appends a tracked value's op batches to a storage list, one encoded batch per write.

    - :meth:`checkpoint` is the ordinary, paced write: at most once per ``interval``
      seconds (the first one ``interval`` after the stream opened), and only when the
      source is dirty.
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
        lease: Lease | None = None,
    ) -> None:
        super().__init__(address, source, interval=interval, rebase_every=rebase_every, clock=clock)
        self.session = session
        #: The operation's lease when it is leased: every write carries its fencing token.
        self.lease = lease
        # The trailing checkpoint: a loop timer while it waits out the interval, then a
        # task (created only when the wait is over; a call that ends sooner, fenced by its
        # settlement, never runs one).
        self._timer: asyncio.TimerHandle | None = None
        self._trailer: asyncio.Task[None] | None = None

    # -- writes --------------------------------------------------------------------------

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

    async def commit(self, writes: Sequence[Write] | Callable[[], Sequence[Write]]) -> CommitResult:
        """Commit ``writes`` to the stream's session, fenced by its lease if it has one
        (a :class:`FencedError` then also fences the stream: this host lost the call)."""
        try:
            if self.lease is not None:
                return await self.lease.commit(writes)
            return await self.session.commit(writes)
        except FencedError:
            self.fence()
            raise

    async def _commit(self, *, base: bool, swallow: bool) -> bool:
        if self._fenced:
            return False
        meters = _otel.meters()
        started = time.monotonic() if meters is not None else 0.0
        try:
            result = await self.commit(lambda: self.plan(base=base))
        except FencedError:
            # Never swallowed: the host must learn it no longer owns the call.
            self.lost()
            raise
        except (StorageError, OSError):
            self.lost()
            if swallow:
                return False
            raise
        except BaseException:
            self.lost()
            raise
        if meters is not None and result.seqs:
            # Paced checkpoints and forced writes (settlement, recovery bases) apart.
            meters.checkpoint_duration.record(
                time.monotonic() - started, {"toolfold.checkpoint.forced": not swallow}
            )
        return bool(result.seqs)

    def notify(self) -> None:
        """The source changed: make sure an ordinary checkpoint follows, paced.

        Arms (at most one) trailing timer for the rest of the interval since the last
        durable write; when it fires, a task checkpoints (at once if no wait is left), so
        the final state of a burst is not left waiting for the next change. Needs a
        running event loop.
        """
        if self._fenced or self._timer is not None:
            return
        if self._trailer is not None and not self._trailer.done():
            return
        wait = self._paced_from() + self.interval - self._clock()
        if wait > 0:
            import asyncio  # here, not at the top: a stream's batches are planned without it

            self._timer = asyncio.get_running_loop().call_later(wait, self._start_trailing)
        else:
            self._start_trailing()

    def _start_trailing(self) -> None:
        self._timer = None
        if self._fenced or not self.source.dirty:
            return  # nothing for a trailing checkpoint to do
        import asyncio

        self._trailer = asyncio.get_running_loop().create_task(self._trailing())
        self._trailer.add_done_callback(_retrieve)

    async def _trailing(self) -> None:
        import asyncio

        # Loops until the source is clean: changes made while a checkpoint was in flight
        # found this task still running (notify() did nothing), so it must pick them up.
        while not self._fenced and self.source.dirty:
            wait = self._paced_from() + self.interval - self._clock()
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
        super().fence()
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if self._trailer is not None and not self._trailer.done():
            self._trailer.cancel()

    async def aclose(self) -> None:
        """Fence (cancelling a pending trailing timer) and wait for a running trailing
        checkpoint to finish."""
        task = self._trailer
        self.fence()
        if task is not None:
            import asyncio

            # The trailing task only ever ran best-effort checkpoints; whatever ended it,
            # the caller's own forced write (or settlement) is what counts now.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _retrieve(task: asyncio.Task[None]) -> None:
    # The trailing timer only runs best-effort checkpoints and nobody awaits it once
    # its call is gone (a crash abandons it): mark its exception retrieved here, so
    # that it is not logged from a garbage-collector finalizer. Such a log formats a
    # traceback, which on CPython 3.11 can re-enter ast.parse from inside another
    # ast.parse and leave its recursion counter broken for the rest of the process.
    if not task.cancelled():
        task.exception()
