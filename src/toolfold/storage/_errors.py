"""The one exception hierarchy of toolfold.storage.

::

    Exception
     └── StorageError              anything storage refuses or cannot do
          ├── ScopeError           a bad scope id, or writes of two scopes in one transaction
          ├── InvalidValueError    a value that is not plain JSON (also a TypeError)
          ├── CorruptStoreError    a store file/record that cannot be read (carries path, record)
          ├── ClosedError          a session or repository used after ``close()``
          ├── ReadOnlyError        a write through a read-only session or repository
          ├── BackendError         the backend broke underneath us (sqlite3, psycopg, OSError)
          ├── SessionNotFoundError opening/deleting a session that does not exist
          ├── SessionExistsError   creating a session that already exists
          └── ConflictError        a commit whose ``expect`` precondition did not hold

Errors from sqlite3, psycopg and the operating system never leak out of the
layer: they are re-raised as one of these with the original as ``__cause__``.
"""

from __future__ import annotations


class StorageError(Exception):
    """Root of every error toolfold.storage raises."""


class ScopeError(StorageError, ValueError):
    """Raised for an invalid scope id, or a transaction whose writes span two scopes."""


class InvalidValueError(StorageError, TypeError):
    """Raised when a value to store is not plain JSON; names the write and the bad part.

    Nothing of the transaction is committed.
    """


class CorruptStoreError(StorageError):
    """Raised when a store cannot be read back: a malformed record, a foreign side file,
    a file that is not a database.

    ``path`` is the offending file (or DSN / table); ``record`` is the line number or
    record identifier when known, else ``None``; ``offset`` is the byte offset of the
    damaged record in ``path`` when known (JSONL).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        record: int | str | None = None,
        offset: int | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.record = record
        self.offset = offset


class ClosedError(StorageError):
    """Raised when a session or repository is used after it was closed by its owner.

    "Closed by us" — compare :class:`BackendError`, "broke underneath us".
    """


class ReadOnlyError(StorageError):
    """Raised by a commit on a session opened read-only, and by creating or deleting a
    session through a read-only repository: readers never modify a store."""


class BackendError(StorageError):
    """Raised when the underlying database or file system fails; ``__cause__`` holds the
    original exception. The transaction in flight was not committed (or, for a failure
    after the commit point, the error says so)."""


class SessionNotFoundError(StorageError, LookupError):
    """Raised when opening or deleting a session that does not exist in the repository."""


class SessionExistsError(StorageError):
    """Raised when creating a session whose name is already taken."""


def storage_failure(exc: BaseException) -> StorageError | None:
    """The storage error behind ``exc``: ``exc`` itself, or the first one of an exception
    group that holds storage errors only (a harness run raises its calls' failures as a
    group). ``None`` when anything else is in it: that is a bug, and keeps its traceback."""
    if isinstance(exc, StorageError):
        return exc
    if not isinstance(exc, BaseExceptionGroup):
        return None
    matched, rest = exc.split(StorageError)
    if matched is None or rest is not None:
        return None
    first: BaseException = matched
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first if isinstance(first, StorageError) else None


class ConflictError(StorageError):
    """Raised when a commit's precondition (``expect(address, value)``) does not hold:
    the value stored at ``address`` is not ``expected``. Nothing of the transaction was
    committed. ``found`` is the stored value (``None``: missing).

    The check runs atomically with the commit (inside the database transaction on SQL
    backends), so it is how writers on many hosts make a write conditional — fencing
    tokens are built on it (see docs/durability.md)."""

    def __init__(self, message: str, *, address: object, expected: object, found: object) -> None:
        super().__init__(message)
        self.address = address
        self.expected = expected
        self.found = found
