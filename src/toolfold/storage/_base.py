"""The abstract session and repository: the session line, argument checks, paging rules.

Backends implement the ``_``-prefixed hooks; everything a caller touches (validation,
the one-scope rule, the serialising line, closed checks, cancellation safety) lives
here once, so every backend behaves the same at its edges.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, Protocol, Self, TypeVar, overload

import orjson

from ._addresses import SESSION, EphemeralScope, ListAddress, Scope, ValueAddress, check_part
from ._changes import ChangeWaiters
from ._errors import (
    ClosedError,
    ConflictError,
    CorruptStoreError,
    ReadOnlyError,
    SessionExistsError,
    StorageError,
)
from ._writes import (
    JSON,
    EphemeralWrite,
    Expect,
    SessionWrite,
    Write,
    check_writes,
    scope_of,
)

__all__ = [
    "CommitResult",
    "Entry",
    "EntryIndex",
    "FsyncPolicy",
    "ListElement",
    "Order",
    "Paged",
    "Repository",
    "Session",
    "StoredElement",
    "check_expect",
    "check_session_name",
    "cut_at_tag",
    "decode_json",
    "encode_json",
    "key_range",
    "load_stored",
    "page_sorted",
]

T = TypeVar("T")
Order = Literal["asc", "desc"]

_SESSION_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


@dataclass(frozen=True, slots=True)
class CommitResult:
    """The seqs a commit assigned, one per write, in write order (empty: nothing written)."""

    seqs: tuple[int, ...]

    @property
    def last_seq(self) -> int | None:
        """The seq of the last write, or ``None`` if the commit wrote nothing."""
        return self.seqs[-1] if self.seqs else None


@dataclass(frozen=True, slots=True)
class ListElement:
    """One element of a stored list: its global ``seq``, opaque ``value`` and ``tag``."""

    seq: int
    value: JSON
    tag: str | None


@dataclass(frozen=True, slots=True)
class Entry:
    """One settled transcript entry with its global ``seq``, its index ``key`` and its
    ``summary`` (both as written by ``append_entry``; ``value`` is ``None`` when read
    with ``summaries=True``)."""

    seq: int
    value: JSON
    key: str | None = None
    summary: JSON = None


@dataclass(frozen=True, slots=True)
class FsyncPolicy:
    """When a backend forces data to stable storage.

    ``main`` governs the session scope (main log / main tables), ``side`` the ephemeral
    scopes (JSONL side files). ``"commit"``: every commit is durable when ``commit()``
    returns (survives power loss). ``"none"``: data is handed to the OS at commit
    (survives a process crash, not necessarily a power loss). SQL backends have one
    database, so they use ``main`` for everything (see docs/storage.md).
    """

    main: Literal["commit", "none"] = "commit"
    side: Literal["commit", "none"] = "commit"

    def __post_init__(self) -> None:
        for field in ("main", "side"):
            v = getattr(self, field)
            if v not in ("commit", "none"):
                raise StorageError(f"FsyncPolicy.{field} must be 'commit' or 'none', got {v!r}")


def check_session_name(name: object) -> str:
    """Return ``name`` if it is a valid session name, else raise :class:`StorageError`.

    Valid: 1–128 characters of ``A-Z a-z 0-9 . _ -``, not starting with ``.`` — safe as a
    file name on every platform and never a hidden or temp file.
    """
    if not isinstance(name, str) or not _SESSION_NAME.fullmatch(name) or name.startswith("."):
        raise StorageError(
            f"invalid session name {name!r}: use 1-128 characters of A-Z a-z 0-9 . _ - "
            "not starting with '.'"
        )
    return name


def encode_json(value: object) -> bytes:
    """Encode an already-checked JSON value (see ``check_json``) as compact UTF-8 bytes."""
    return orjson.dumps(value)


def decode_json(data: bytes | str, *, path: str, record: int | str | None = None) -> JSON:
    """Decode stored JSON; malformed data is a :class:`CorruptStoreError` naming where."""
    try:
        result: JSON = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise CorruptStoreError(
            f"{path}: record {record} is not valid JSON ({exc}); the store is damaged",
            path=path,
            record=record,
        ) from exc
    return result


class StoredElement:
    """A list element or entry as the in-process backends (memory, JSONL) index it: the
    encoded JSON its commit wrote, so a read decodes a fresh value and a caller can never
    mutate the store through what it read."""

    __slots__ = ("data", "seq", "tag")

    def __init__(self, seq: int, data: bytes, tag: str | None) -> None:
        self.seq = seq
        self.data = data
        self.tag = tag


def load_stored(data: bytes) -> JSON:
    """Decode JSON this process encoded itself (a :class:`StoredElement`'s, or an indexed
    value's), so there is no damage to report."""
    result: JSON = orjson.loads(data)
    return result


class Paged(Protocol):
    """Anything the pager can page: it has a ``seq`` and a ``tag``."""

    @property
    def seq(self) -> int: ...
    @property
    def tag(self) -> str | None: ...


P = TypeVar("P", bound=Paged)


def cut_at_tag(elements: list[P], stop_at_tag: str | None) -> list[P]:
    """Cut a page right *after* the first element tagged ``stop_at_tag`` (inclusive stop)."""
    if stop_at_tag is None:
        return elements
    for i, el in enumerate(elements):
        if el.tag == stop_at_tag:
            return elements[: i + 1]
    return elements


def page_sorted(
    elements: Sequence[P],
    *,
    cursor: int | None,
    order: Order,
    limit: int | None,
    stop_at_tag: str | None,
) -> list[P]:
    """Page an ascending-by-seq sequence: exclusive cursor, order, at most ``limit``
    examined, then the inclusive ``stop_at_tag`` cut. Never looks past the page."""
    if order == "asc":
        start = 0 if cursor is None else bisect.bisect_right(elements, cursor, key=_seq)
        end = len(elements) if limit is None else min(len(elements), start + limit)
        page = list(elements[start:end])
    else:
        end = len(elements) if cursor is None else bisect.bisect_left(elements, cursor, key=_seq)
        start = 0 if limit is None else max(0, end - limit)
        page = list(elements[start:end])
        page.reverse()
    return cut_at_tag(page, stop_at_tag)


def _seq(el: Paged | _StoredEntry) -> int:
    return el.seq


def key_range(prefix: str) -> tuple[str, str | None]:
    """``(low, high)`` such that ``low <= key < high`` (no ``high``: no upper bound) is
    exactly "``key`` starts with ``prefix``" in code point order — the order of SQLite's
    UTF-8 bytes and of PostgreSQL's ``COLLATE "C"``, so an index on the key serves it."""
    for i in range(len(prefix) - 1, -1, -1):
        c = ord(prefix[i])
        nxt = c + 1 if c + 1 != 0xD800 else 0xE000  # skip the surrogate block
        if nxt <= 0x10FFFF:
            return prefix, prefix[:i] + chr(nxt)
    return prefix, None


class _StoredEntry:
    __slots__ = ("data", "key", "seq", "summary")

    def __init__(self, seq: int, data: bytes, key: str | None, summary: bytes) -> None:
        self.seq = seq
        self.data = data
        self.key = key
        self.summary = summary


class EntryIndex:
    """The transcript as the in-process backends (memory, JSONL) hold it: encoded entries
    in seq order, plus the keyed ones by position and by key, so a page, a count or a
    lookup by key costs what it returns rather than the whole transcript."""

    def __init__(self) -> None:
        self._all: list[_StoredEntry] = []
        self._keyed: list[_StoredEntry] = []
        self._by_key: dict[str, list[_StoredEntry]] = {}
        self._sorted_keys: list[str] = []

    def append(self, seq: int, data: bytes, key: str | None, summary: bytes) -> None:
        """Add an entry (seqs only grow)."""
        e = _StoredEntry(seq, data, key, summary)
        self._all.append(e)
        if key is not None:
            self._keyed.append(e)
            same = self._by_key.get(key)
            if same is None:
                self._by_key[key] = [e]
                bisect.insort(self._sorted_keys, key)
            else:
                same.append(e)

    def count(self, keyed: bool) -> int:
        """How many entries (keyed ones only when ``keyed``)."""
        return len(self._keyed if keyed else self._all)

    def read(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]:
        """A page, as :meth:`Session.read_entries` defines it."""
        items = self._keyed if keyed else self._all
        if order == "asc":
            start = 0 if cursor is None else bisect.bisect_right(items, cursor, key=_seq)
            start += offset
            end = len(items) if limit is None else min(len(items), start + limit)
            page = items[start:end]
        else:
            end = len(items) if cursor is None else bisect.bisect_left(items, cursor, key=_seq)
            end = max(0, end - offset)
            start = 0 if limit is None else max(0, end - limit)
            page = items[start:end][::-1]
        return [_loaded(e, summaries) for e in page]

    def by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]:
        """Entries under ``key`` (or every key starting with it), by seq."""
        if not prefix:
            found = list(self._by_key.get(key, ()))
        else:
            low, high = key_range(key)
            i = bisect.bisect_left(self._sorted_keys, low)
            j = (
                len(self._sorted_keys)
                if high is None
                else bisect.bisect_left(self._sorted_keys, high)
            )
            found = sorted((e for k in self._sorted_keys[i:j] for e in self._by_key[k]), key=_seq)
        return [_loaded(e, False) for e in found[:limit]]


def _loaded(e: _StoredEntry, summaries: bool) -> Entry:
    return Entry(e.seq, None if summaries else load_stored(e.data), e.key, load_stored(e.summary))


async def _finish_uncancelled(aw: Awaitable[T]) -> T:
    """Await ``aw`` to completion even if we are cancelled meanwhile, then re-raise the
    cancellation. A commit half-way through a backend write must keep the session line
    held until the write is over, or the next commit could overtake it."""
    task = asyncio.ensure_future(aw)
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


def check_expect(session: str, e: Expect, found: bytes | str | None) -> None:
    """Raise :class:`ConflictError` unless ``found`` (the stored JSON text at ``e``'s
    address, ``None``: missing) is ``e``'s value. Compares encoded text: storage never
    interprets the values it guards."""
    want = None if e.value is None else encode_json(e.value)
    got = found.encode() if isinstance(found, str) else found
    if got == want:
        return
    shown = None if got is None else decode_json(got, path="(precondition)")
    raise ConflictError(
        f"commit of session {session!r} refused: expected {e.address} to be "
        f"{e.value!r:.80}, found {shown!r:.80}; nothing was written",
        address=e.address,
        expected=e.value,
        found=shown,
    )


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
        self._check_open()
        if self._read_only:
            raise ReadOnlyError(
                f"session {self._name!r} was opened read-only; open it with "
                "open_session(name) from a writable repository to commit"
            )
        expects = tuple(expect)
        for e in expects:
            if not isinstance(e, Expect):
                raise StorageError(
                    f"commit of session {self._name!r}: expect must hold expect(address, "
                    f"value) preconditions, got {type(e).__name__} {e!r:.80}"
                )
        async with self._line:
            self._check_open()
            batch = writes() if callable(writes) else writes
            if not isinstance(batch, list | tuple):
                raise StorageError(
                    f"commit of session {self._name!r} needs a list of writes "
                    f"(or a callable returning one), got {type(batch).__name__} {batch!r:.80}"
                )
            if not batch:
                return CommitResult(())
            ws = tuple(batch)
            scope = scope_of(ws)
            check_writes(ws)
            if expects and not self._expects_in_transaction:
                for e in expects:
                    found = await self._get_value(e.address)
                    check_expect(self._name, e, None if found is None else encode_json(found))
            self._expect = expects
            try:
                seqs = await _finish_uncancelled(self._commit_writes(ws, scope))
            finally:
                self._expect = ()
            if self._on_commit is not None:
                self._on_commit(self._name, seqs[-1])
            return CommitResult(seqs)

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
    async def _commit_writes(self, writes: tuple[Write, ...], scope: Scope) -> tuple[int, ...]:
        """Atomically apply ``writes`` (all in ``scope``, already validated), assigning each
        a fresh seq; return the seqs and advance ``_next_seq``. Runs inside the line."""

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


class Repository(_Closable):
    """A store holding many sessions (a directory, a database file, a database).

    At most one open :class:`Session` object per session name per repository: the
    session line lives in that object, so a second one would defeat serialisation.
    Closing the repository closes its open sessions.
    """

    #: A short description of where the store lives, for messages (e.g. the path).
    location: str = "?"

    def __init__(self, *, read_only: bool = False) -> None:
        self._open: dict[str, Session] = {}
        self._readers: set[Session] = set()
        self._closed = False
        self._lock = asyncio.Lock()
        #: A read-only repository opens every session read-only and never creates,
        #: deletes or repairs anything (the CLI's reading commands use one).
        self.read_only = read_only
        self._waiters = ChangeWaiters()
        self._watcher: asyncio.Task[None] | None = None
        self._watcher_ready: asyncio.Future[None] | None = None

    async def create_session(self, name: str) -> Session:
        """Create and open a new session; :class:`SessionExistsError` if it exists."""
        self._check_open()
        check_session_name(name)
        self._check_writable(f"create session {name!r}")
        async with self._lock:
            self._check_open()
            if name in self._open:
                raise SessionExistsError(
                    f"session {name!r} already exists in {self.location} (and is open)"
                )
            return self._register(await self._create_session(name))

    async def open_session(
        self, name: str, *, create: bool = False, read_only: bool = False
    ) -> Session:
        """Open an existing session (:class:`SessionNotFoundError` if missing), or create
        it when ``create`` is true.

        ``read_only`` (always the case in a read-only repository) opens a reader: it
        modifies nothing on disk (no lock, no repair of a torn tail), its commits raise
        :class:`ReadOnlyError`, and any number of readers may be open beside the one
        writer. A JSONL reader is a snapshot of the files as they were when it opened.
        """
        self._check_open()
        check_session_name(name)
        if read_only or self.read_only:
            if create:
                raise ReadOnlyError(
                    f"cannot create session {name!r} with a read-only open of {self.location}"
                )
            session = await self._open_reader(name)
            session._read_only = True
            self._readers.add(session)
            session._on_close = self._forget
            return session
        async with self._lock:
            self._check_open()
            if name in self._open:
                raise StorageError(
                    f"session {name!r} is already open in this repository ({self.location}); "
                    "share that Session object or close it first"
                )
            return self._register(await self._open_session(name, create=create))

    async def list_sessions(self) -> list[str]:
        """Return the names of all sessions in the store, sorted."""
        self._check_open()
        return sorted(await self._list_sessions())

    async def delete_session(self, name: str) -> None:
        """Delete a session and everything it holds (side files, rows, spill).

        :class:`SessionNotFoundError` if it does not exist; a :class:`StorageError` if it
        is open in this repository (close it first).
        """
        self._check_open()
        check_session_name(name)
        self._check_writable(f"delete session {name!r}")
        async with self._lock:
            self._check_open()
            if name in self._open:
                raise StorageError(
                    f"session {name!r} is open in this repository ({self.location}); "
                    "close it before deleting it"
                )
            await self._delete_session(name)

    async def wait_for_change(self, name: str, after_seq: int) -> int:
        """Wait until session ``name`` holds a commit with a seq above ``after_seq``,
        made by any process, and return the session's high-water seq.

        Returns at once when the session is already past ``after_seq``. Commits may
        coalesce: read everything up to the returned seq. A wait never wakes without a
        commit past ``after_seq``. One watcher per repository serves every waiter, so
        following a thousand sessions costs one LISTEN connection (PostgreSQL) or one
        cheap check every :data:`CHANGE_POLL_INTERVAL` seconds (SQLite
        ``PRAGMA data_version``; JSONL file sizes), never a read of every session.
        :class:`SessionNotFoundError` if there is no such session; bound the wait
        with ``asyncio.timeout``.
        """
        self._check_open()
        check_session_name(name)
        if not isinstance(after_seq, int) or isinstance(after_seq, bool):
            raise StorageError(f"wait_for_change: after_seq must be a seq (int), got {after_seq!r}")
        # Wait first, look second: a commit landing between the two still wakes us.
        waiter = self._waiters.add(name, after_seq)
        try:
            await self._ensure_watcher()
            high = await self._high_water(name)
            if high > after_seq:
                return high
            return await waiter.future
        finally:
            self._waiters.discard(waiter)
            if waiter.future.done() and not waiter.future.cancelled():
                waiter.future.exception()  # a failure we raised another way is seen

    async def changes(self, name: str, *, after_seq: int = 0) -> AsyncIterator[int]:
        """Yield session ``name``'s high-water seq each time it moves past the last
        one yielded (starting after ``after_seq``), whoever committed: an endless
        :meth:`wait_for_change` loop."""
        while True:
            after_seq = await self.wait_for_change(name, after_seq)
            yield after_seq

    async def _ensure_watcher(self) -> None:
        if not self._watches:
            return
        if self._watcher is None or self._watcher.done():
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._watcher_ready = ready
            self._watcher = asyncio.create_task(
                self._run_watcher(ready), name=f"toolfold changes {self.location}"
            )
        assert self._watcher_ready is not None
        await asyncio.shield(self._watcher_ready)

    async def _run_watcher(self, ready: asyncio.Future[None]) -> None:
        def mark_ready() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            await self._watch(self._waiters, mark_ready)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failure = (
                exc
                if isinstance(exc, StorageError)
                else StorageError(f"watching {self.location} for changes failed: {exc!r}")
            )
            if not ready.done():
                ready.set_exception(failure)
            self._waiters.fail(failure)
        finally:
            if not ready.done():
                ready.set_exception(ClosedError(f"repository {self.location} was closed"))

    async def close(self) -> None:
        """Close every open session, then the store (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
            self._watcher = None
        self._waiters.fail(ClosedError(f"repository {self.location} was closed"))
        try:
            for session in [*self._open.values(), *self._readers]:
                await session.close()
        finally:
            await self._close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.location}{' closed' if self._closed else ''}>"

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"repository {self.location} is closed; open it again")

    def _register(self, session: Session) -> Session:
        self._open[session.name] = session
        session._on_close = self._forget
        session._on_commit = self._waiters.publish
        return session

    def _forget(self, session: Session) -> None:
        self._readers.discard(session)
        if self._open.get(session.name) is session:
            del self._open[session.name]

    def _check_writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"cannot {what}: repository {self.location} was opened read-only")

    # -- backend hooks ------------------------------------------------------------

    @abstractmethod
    async def _create_session(self, name: str) -> Session:
        """Create a new session (raise SessionExistsError if it exists) and open it."""

    @abstractmethod
    async def _open_session(self, name: str, *, create: bool) -> Session:
        """Open ``name`` (SessionNotFoundError if missing and not ``create``)."""

    async def _open_reader(self, name: str) -> Session:
        """Open ``name`` for reading only, changing nothing on disk (SessionNotFoundError
        if missing). Backends whose open writes nothing can use a plain open."""
        return await self._open_session(name, create=False)

    @abstractmethod
    async def _list_sessions(self) -> list[str]: ...

    @abstractmethod
    async def _delete_session(self, name: str) -> None:
        """Delete ``name`` (SessionNotFoundError if missing). It is not open here."""

    @abstractmethod
    async def _close(self) -> None:
        """Release the store's resources (called once, after its sessions closed)."""

    #: Whether other processes can commit to this store, so a watcher must look for
    #: their commits (``_watch``); the memory backend has only this process.
    _watches = True

    @abstractmethod
    async def _high_water(self, name: str) -> int:
        """The session's highest committed seq as the store has it now (0 when empty;
        SessionNotFoundError if missing)."""

    async def _watch(self, waiters: ChangeWaiters, ready: Callable[[], None]) -> None:
        """Publish other processes' commits to ``waiters`` until cancelled. Call
        ``ready()`` once every later commit is sure to be noticed. Runs as one task per
        repository, started by the first ``wait_for_change``."""
        raise NotImplementedError
