"""What a commit checks before any backend sees it, as plain functions: the preconditions'
types, one batch's scope and payloads, a cross-scope commit's two parts, and the check
of one precondition against the stored text.

``Session`` (the asyncio session every backend shares) runs them in its session line; a
synchronous session (``SyncSqliteSession``, ``toolfold run``'s direct path) runs the same
ones in line, so both refuse exactly the same commits with the same errors."""

from __future__ import annotations

from collections.abc import Sequence

from ._addresses import SESSION, EphemeralScope, Scope
from ._errors import ConflictError, ScopeError, StorageError
from ._records import decode_json, encode_json
from ._writes import (
    EphemeralWrite,
    Expect,
    RetireScope,
    SessionWrite,
    Write,
    check_writes,
    scope_of,
)

__all__ = ["check_expect", "check_expects", "checked_across", "checked_batch"]


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


def check_expects(session: str, expect: Sequence[Expect]) -> tuple[Expect, ...]:
    """``expect`` as a tuple, every item an :class:`Expect` (else :class:`StorageError`)."""
    expects = tuple(expect)
    for e in expects:
        if not isinstance(e, Expect):
            raise StorageError(
                f"commit of session {session!r}: expect must hold expect(address, "
                f"value) preconditions, got {type(e).__name__} {e!r:.80}"
            )
    return expects


def checked_batch(session: str, batch: object) -> tuple[tuple[Write, ...], Scope] | None:
    """One commit's writes (a callable's result, or the list given), checked: their one
    scope, or ``None`` for an empty batch (nothing is written, no seq is used)."""
    if not isinstance(batch, list | tuple):
        raise StorageError(
            f"commit of session {session!r} needs a list of writes "
            f"(or a callable returning one), got {type(batch).__name__} {batch!r:.80}"
        )
    if not batch:
        return None
    ws = tuple(batch)
    scope = scope_of(ws)
    check_writes(ws)
    return ws, scope


def checked_across(
    session: str, main: tuple[SessionWrite, ...], side: tuple[EphemeralWrite, ...]
) -> tuple[Write, ...]:
    """A cross-scope commit's writes (both parts non-empty), checked: session-scope
    writes first, then the writes of ONE ephemeral scope, no retirement among them."""
    if scope_of(main) != SESSION:
        raise ScopeError(
            f"commit_across of session {session!r}: its session_writes must all be "
            "in the session scope"
        )
    if not isinstance(scope_of(side), EphemeralScope):
        raise ScopeError(
            f"commit_across of session {session!r}: its scope_writes must all be "
            "in one ephemeral scope"
        )
    if any(isinstance(w, RetireScope) for w in main):
        raise StorageError(
            f"commit_across of session {session!r}: retire_scope is committed on "
            "its own or with settled entries, not across scopes"
        )
    ws = main + side
    check_writes(ws)
    return ws
