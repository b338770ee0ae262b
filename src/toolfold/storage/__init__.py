"""toolfold.storage — the session store: scoped values, tagged lists, entries, one seq.

Settled history lives in the session scope; an operation's crash-recovery scaffolding
lives in an ephemeral scope that is retired (deleted) when the operation settles.
Commits are atomic, stay in one scope, and are serialised on a per-session line.
Backends: memory, JSONL files, SQLite, PostgreSQL (see docs/storage.md).
``Repository.wait_for_change`` / ``changes`` tell a follower that a session moved,
whoever committed (docs/storage.md, "Following changes").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._lazy import lazy_exports

from ._addresses import (
    SESSION,
    EphemeralScope,
    ListAddress,
    Scope,
    SessionScope,
    ValueAddress,
    encode_scope_id,
    ephemeral_scope,
    list_address,
    value,
)
from ._errors import (
    BackendError,
    ClosedError,
    ConflictError,
    CorruptStoreError,
    InvalidValueError,
    ReadOnlyError,
    ScopeError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
    storage_failure,
)
from ._records import CommitResult, FsyncPolicy
from ._writes import (
    JSON,
    AppendEntry,
    AppendList,
    DeleteList,
    DeleteValue,
    EphemeralWrite,
    Expect,
    JSONLike,
    RetireScope,
    SessionWrite,
    SetValue,
    Write,
    append_entry,
    append_list,
    delete_list,
    delete_value,
    expect,
    retire_scope,
    scope_of,
    set_value,
)

if TYPE_CHECKING:
    from ._base import Session
    from ._base_repository import Repository
    from ._changes import CHANGE_POLL_INTERVAL
    from ._entries import Entry, ListElement
    from ._memory import MemoryRepository
    from ._repository import open_repository

# The in-process backend is imported on first use (`open_repository("memory:")` does
# it too): a run on SQLite or PostgreSQL needs none of it. The asyncio session and
# repository (and what opens them) are imported on first use too: the writes, records,
# addresses, errors and the SQLite file's statements import without asyncio, for a
# caller that commits without an event loop. What a read hands back (list elements,
# entries) is defined with the first read: a process that only commits never reads.
__getattr__ = lazy_exports(
    __name__,
    {
        "CHANGE_POLL_INTERVAL": "._changes",
        "Entry": "._entries",
        "ListElement": "._entries",
        "MemoryRepository": "._memory",
        "Repository": "._base_repository",
        "Session": "._base",
        "open_repository": "._repository",
    },
)

__all__ = [
    "CHANGE_POLL_INTERVAL",
    "JSON",
    "SESSION",
    "AppendEntry",
    "AppendList",
    "BackendError",
    "ClosedError",
    "CommitResult",
    "ConflictError",
    "CorruptStoreError",
    "DeleteList",
    "DeleteValue",
    "Entry",
    "EphemeralScope",
    "EphemeralWrite",
    "Expect",
    "FsyncPolicy",
    "InvalidValueError",
    "JSONLike",
    "ListAddress",
    "ListElement",
    "MemoryRepository",
    "ReadOnlyError",
    "Repository",
    "RetireScope",
    "Scope",
    "ScopeError",
    "Session",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionScope",
    "SessionWrite",
    "SetValue",
    "StorageError",
    "ValueAddress",
    "Write",
    "append_entry",
    "append_list",
    "delete_list",
    "delete_value",
    "encode_scope_id",
    "ephemeral_scope",
    "expect",
    "list_address",
    "open_repository",
    "retire_scope",
    "scope_of",
    "set_value",
    "storage_failure",
    "value",
]
