"""The abstract repository: sessions by name, change notification, closing.

Backends implement the ``_``-prefixed hooks; the checks and the shared behaviour live here
once, so every backend behaves the same at its edges."""

from __future__ import annotations

import asyncio
import contextlib
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable

from ._base import Session, _Closable
from ._changes import ChangeWaiters
from ._errors import ClosedError, ReadOnlyError, SessionExistsError, StorageError
from ._records import check_session_name

__all__ = ["Repository"]


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
