"""The abstract session: the session line, argument checks, closing.

Backends implement the ``_``-prefixed hooks; everything a caller touches (validation,
the one-scope rule, the serialising line, closed checks, cancellation safety) lives
here once, so every backend behaves the same at its edges.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar, overload

from ._addresses import SESSION, EphemeralScope, ListAddress, Scope, ValueAddress, check_part
from ._commit_checks import check_expect, check_expects, checked_across, checked_batch
from ._errors import (
    ClosedError,
    ReadOnlyError,
    StorageError,
)
from ._records import CommitResult, Order, encode_json
from ._writes import (
    JSON,
    EphemeralWrite,
    Expect,
    SessionWrite,
    Write,
)

if TYPE_CHECKING:
    from ._entries import Entry, ListElement

__all__ = ["Session", "check_expect"]

T = TypeVar("T")


async def _finish_uncancelled(aw: Awaitable[T]) -> T:
    """Await ``aw`` to completion even if we are cancelled meanwhile, then re-raise the
    cancellation. A commit half-way through a backend write must keep the session line
    held until the write is over, or the next commit could overtake it."""
    task = asyncio.ensure_future(aw)  # a future stays itself; a coroutine gets a task
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(task)
            break
        except asyncio.CancelledError:
            if task.done():
                raise
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result


class _Closable(ABC):
    """What sessions and repositories share about closing: the ``closed`` flag and
    ``async with`` (which closes on the way out, whatever happened inside)."""

    _closed: bool

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @abstractmethod
    async def close(self) -> None:
        """Close (idempotent); afterwards the other methods raise :class:`ClosedError`."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class Session(_Closable):
    """One open session of a store: values, lists and entries in scopes, one global seq.

    All commits of a session go through one *session line* (an ``asyncio.Lock``): they
    are executed one at a time in arrival order, and a callable payload is evaluated
    inside the line, right before its writes execute — so a payload computed later is
    always committed later (durable checkpoints rely on this; see docs/storage.md).
    Reads do not wait for the line; they see every commit that has returned.
    """

    def __init__(self, name: str, next_seq: int) -> None:
        self._name = name
        self._next_seq = next_seq
        self._line = asyncio.Lock()
        self._closed = False
        self._on_close: Callable[[Session], None] | None = None
        #: Told the session's new high-water seq after each commit (the repository's
        #: change signal, so its own commits wake its followers at once).
        self._on_commit: Callable[[str, int], None] | None = None
        self._read_only = False
        # The preconditions of the commit in flight, for backends that check them inside
        # their own transaction (``_expects_in_transaction``); empty between commits.
        self._expect: tuple[Expect, ...] = ()
        #: What opening the session found and dealt with: a torn last record dropped by a
        #: writer, or skipped by a reader (one line each, naming the file and offset).
        self.notes: tuple[str, ...] = ()

    #: Whether the backend checks ``self._expect`` inside its commit transaction (SQL
    #: backends: other processes write the same rows); otherwise the line checks it.
    _expects_in_transaction: bool = False

    # -- public API ------------------------------------------------------------

    @property
    def name(self) -> str:
        """The session's name."""
        return self._name

    @property
    def next_seq(self) -> int:
        """The seq the next write would get at the earliest (high-water mark + 1)."""
        return self._next_seq

    @property
    def read_only(self) -> bool:
        """True for a session opened with ``read_only=True`` (commits raise
        :class:`ReadOnlyError`; opening it changed nothing on disk)."""
        return self._read_only

    @overload
    async def commit(
        self, writes: Sequence[SessionWrite], *, expect: Sequence[Expect] = ()
    ) -> CommitResult: ...
    @overload
    async def commit(
        self, writes: Sequence[EphemeralWrite], *, expect: Sequence[Expect] = ()
    ) -> CommitResult: ...
    @overload
    async def commit(
        self, writes: Callable[[], Sequence[Write]], *, expect: Sequence[Expect] = ()
    ) -> CommitResult: ...
    async def commit(
        self,
        writes: Sequence[Write] | Callable[[], Sequence[Write]],
        *,
        expect: Sequence[Expect] = (),
    ) -> CommitResult:
        """Commit ``writes`` atomically; each write gets the next global seq.

        ``expect`` (preconditions built with ``expect(address, value)``) makes the commit
        conditional: unless every expected session-scope value is stored as given when
        the transaction commits, it raises :class:`ConflictError` and writes nothing. The
        check is atomic with the commit on every backend (inside the transaction on SQL
        backends, which serialise every writer of a session on its row; inside the
        session line on memory and JSONL, whose session has one writing process).

        ``writes`` is a sequence of writes, or a callable returning one, evaluated inside
        the session line right before the writes execute (it may return ``[]``: nothing is
        written and no seq is used). All writes must be in one scope (:class:`ScopeError`
        otherwise); values must be plain JSON (:class:`InvalidValueError`). On any error
        nothing of the transaction is committed.
        """
        self._check_writable()
        expects = self._check_expects(expect)
        async with self._line:
            self._check_open()
            checked = checked_batch(self._name, writes() if callable(writes) else writes)
            if checked is None:
                return CommitResult(())
            return await self._commit_locked(*checked, expects)

    async def commit_across(
        self,
        session_writes: Sequence[SessionWrite],
        scope_writes: Sequence[EphemeralWrite],
        *,
        expect: Sequence[Expect] = (),
    ) -> CommitResult:
        """Commit session-scope writes and the writes of ONE ephemeral scope as one
        transaction: what an operation's start needs (its lease in the session scope,
        its records in its own scope) without a commit, and a flush, for each.

        ``expect`` guards the whole: on a conflict neither part is written. The session
        writes get the first seqs. On memory, SQLite and PostgreSQL this is one
        transaction, durable as the session scope's commits are (``fsync.main``). JSONL
        keeps the two scopes in two files: the main log's line is appended first, then
        the scope's side file is written, each flushed as its scope's policy says, in
        one pass of the session line; a process killed between the two leaves the
        session writes without the scope's, as two commits in that order would.
        Either part empty: a plain :meth:`commit` of the other."""
        main, side = tuple(session_writes), tuple(scope_writes)
        if not side:
            return await self.commit(list(main), expect=expect)
        if not main:
            return await self.commit(list(side), expect=expect)
        self._check_writable()
        expects = self._check_expects(expect)
        ws = checked_across(self._name, main, side)
        async with self._line:
            self._check_open()
            return await self._commit_locked(ws, SESSION, expects)

    async def _commit_locked(
        self, ws: tuple[Write, ...], scope: Scope, expects: tuple[Expect, ...]
    ) -> CommitResult:
        """Commit checked writes, in the session line: the preconditions a backend does
        not check inside its transaction are read first; a cancelled caller still
        waits for the transaction's end (it is never left half-known)."""
        if expects and not self._expects_in_transaction:
            for e in expects:
                found = await self._get_value(e.address)
                check_expect(self._name, e, None if found is None else encode_json(found))
        self._expect = expects
        try:
            pending = self._commit_writes(ws, scope)
            if isinstance(pending, asyncio.Future) and pending.done():
                seqs = pending.result()  # committed already (memory): nothing to wait for
            else:
                seqs = await _finish_uncancelled(pending)
        finally:
            self._expect = ()
        if self._on_commit is not None:
            self._on_commit(self._name, seqs[-1])
        return CommitResult(seqs)

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(
                f"session {self._name!r} was opened read-only; open it with "
                "open_session(name) from a writable repository to commit"
            )

    def _check_expects(self, expect: Sequence[Expect]) -> tuple[Expect, ...]:
        return check_expects(self._name, expect)

    async def get_value(self, address: ValueAddress[Any]) -> JSON | None:
        """Return the value at ``address``, or ``None`` if it is missing (or retired)."""
        self._check_open()
        if not isinstance(address, ValueAddress):
            raise StorageError(
                f"get_value needs a value(namespace, key[, scope]) address, got {address!r}"
            )
        return await self._get_value(address)

    async def scan_values(
        self, namespace: str, key_prefix: str = "", scope: Scope = SESSION
    ) -> list[tuple[str, JSON]]:
        """Return ``(key, value)`` of every value in ``namespace``/``scope`` whose key
        starts with ``key_prefix``, in key (code point) order."""
        self._check_open()
        ValueAddress(namespace, key_prefix, scope)  # validates all three
        return await self._scan_values(namespace, key_prefix, scope)

    async def read_list(
        self,
        address: ListAddress[Any],
        *,
        cursor: int | None = None,
        order: Order = "asc",
        limit: int | None = None,
        stop_at_tag: str | None = None,
    ) -> list[ListElement]:
        """Read one page of the list at ``address``.

        Applies the exclusive ``cursor`` (a seq), the ``order``, examines at most ``limit``
        elements, and stops *after including* the first element whose tag is
        ``stop_at_tag``. It never searches past the page: page again from the last seq.
        """
        self._check_open()
        if not isinstance(address, ListAddress):
            raise StorageError(
                f"read_list needs a list_address(namespace, key[, scope]), got {address!r}"
            )
        self._check_page(f"read_list of {address}", cursor, limit)
        if order not in ("asc", "desc"):
            raise StorageError(
                f"read_list of {address}: order must be 'asc' or 'desc', got {order!r}"
            )
        if stop_at_tag is not None and (not isinstance(stop_at_tag, str) or not stop_at_tag):
            raise StorageError(
                f"read_list of {address}: stop_at_tag must be a non-empty str or None, "
                f"got {stop_at_tag!r}"
            )
        if limit == 0:
            return []
        return await self._read_list(address, cursor, order, limit, stop_at_tag)

    async def read_entries(
        self,
        *,
        cursor: int | None = None,
        limit: int | None = None,
        order: Order = "asc",
        keyed: bool = False,
        offset: int = 0,
        summaries: bool = False,
    ) -> list[Entry]:
        """Return one page of settled transcript entries.

        Applies the exclusive ``cursor`` (a seq) in ``order``, skips ``offset`` entries,
        and returns at most ``limit``. ``keyed`` keeps only entries written with a key
        (positions then count keyed entries only); ``summaries`` returns each entry's
        summary with ``value=None`` and never reads the entries themselves. The last N
        entries are ``order="desc", limit=N``; the n-th keyed one is
        ``keyed=True, offset=n - 1, limit=1``. Each costs what it returns.
        """
        self._check_open()
        self._check_page("read_entries", cursor, limit)
        if order not in ("asc", "desc"):
            raise StorageError(f"read_entries: order must be 'asc' or 'desc', got {order!r}")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise StorageError(f"read_entries: offset must be an int >= 0, got {offset!r}")
        if limit == 0:
            return []
        return await self._read_entries(cursor, limit, order, bool(keyed), offset, bool(summaries))

    async def entries_by_key(
        self, key: str, *, prefix: bool = False, limit: int | None = None
    ) -> list[Entry]:
        """Return the entries written under ``key`` (every key starting with ``key`` when
        ``prefix``), ascending by seq, at most ``limit`` — through the key index, without
        reading other entries."""
        self._check_open()
        check_part("entries_by_key", "key", key, allow_empty=prefix)
        self._check_page("entries_by_key", None, limit)
        if limit == 0:
            return []
        return await self._entries_by_key(key, bool(prefix), limit)

    async def count_entries(self, *, keyed: bool = False) -> int:
        """How many transcript entries the session holds (only keyed ones when ``keyed``)."""
        self._check_open()
        return await self._count_entries(bool(keyed))

    async def live_scopes(self) -> list[EphemeralScope]:
        """Return the ephemeral scopes holding live data (not retired), ordered by id.

        These are the operations that had not settled — what recovery must look at.
        """
        self._check_open()
        return sorted(await self._live_scopes(), key=lambda s: s.id)

    async def refresh(self) -> None:
        """Bring what this session reads up to the store's latest commit.

        Only a JSONL reader needs it: it is a snapshot of the files, and this reads
        what was appended since (only the new bytes; a record still being written is
        left for the next refresh). Every other session already reads the latest
        commit, so for them this does nothing.
        """
        self._check_open()
        await self._refresh()

    async def close(self) -> None:
        """Close the session (idempotent). Waits for a commit in flight; afterwards every
        other method raises :class:`ClosedError`."""
        if self._closed:
            return
        async with self._line:
            if self._closed:
                return
            self._closed = True
            try:
                await self._close()
            finally:
                if self._on_close is not None:
                    self._on_close(self)

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"next_seq={self._next_seq}"
        return f"<{type(self).__name__} {self._name!r} {state}>"

    # -- helpers for backends ---------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(
                f"session {self._name!r} is closed; open it again from its repository"
            )

    def _check_page(self, what: str, cursor: object, limit: object) -> None:
        if cursor is not None and (not isinstance(cursor, int) or isinstance(cursor, bool)):
            raise StorageError(f"{what}: cursor must be a seq (int) or None, got {cursor!r}")
        if limit is not None and (
            not isinstance(limit, int) or isinstance(limit, bool) or limit < 0
        ):
            raise StorageError(f"{what}: limit must be an int >= 0 or None, got {limit!r}")

    def _allocate(self, n: int) -> tuple[int, ...]:
        """Reserve ``n`` consecutive seqs. They are burnt even if the write then fails:
        a seq that may have reached the disk is never handed out twice (gaps are fine)."""
        first = self._next_seq
        self._next_seq = first + n
        return tuple(range(first, first + n))

    # -- backend hooks ------------------------------------------------------------

    @abstractmethod
    def _commit_writes(self, writes: tuple[Write, ...], scope: Scope) -> Awaitable[tuple[int, ...]]:
        """Atomically apply ``writes`` (all in ``scope``, already validated), assigning each
        a fresh seq; return the seqs and advance ``_next_seq``. Runs inside the line.

        An awaitable of the seqs: a coroutine (run in a task of its own, so that a
        cancelled caller still waits for its end), or a future (awaited as it is, no
        task: a commit made on the spot returns one already done, one on a worker
        thread the executor's future).

        From :meth:`commit_across`: ``scope`` is ``SESSION`` and the session writes are
        followed by one ephemeral scope's; durable as a session-scope commit."""

    @abstractmethod
    async def _get_value(self, address: ValueAddress[Any]) -> JSON | None: ...

    @abstractmethod
    async def _scan_values(
        self, namespace: str, key_prefix: str, scope: Scope
    ) -> list[tuple[str, JSON]]: ...

    @abstractmethod
    async def _read_list(
        self,
        address: ListAddress[Any],
        cursor: int | None,
        order: Order,
        limit: int | None,
        stop_at_tag: str | None,
    ) -> list[ListElement]: ...

    @abstractmethod
    async def _read_entries(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]: ...

    @abstractmethod
    async def _entries_by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]: ...

    @abstractmethod
    async def _count_entries(self, keyed: bool) -> int: ...

    @abstractmethod
    async def _live_scopes(self) -> list[EphemeralScope]: ...

    @abstractmethod
    async def _close(self) -> None:
        """Release the backend's resources (called once, inside the line)."""

    async def _refresh(self) -> None:
        """Catch up with commits made elsewhere (only snapshot readers need to)."""
