"""Scopes and addresses: where a stored value or list lives, and for how long."""

from __future__ import annotations

import urllib.parse
from typing import Any, Generic, TypeAlias, TypeVar, overload

from toolfold._record import record
from toolfold.chord import lone_surrogate

from ._errors import ScopeError, StorageError

__all__ = [
    "SESSION",
    "EphemeralScope",
    "ListAddress",
    "Scope",
    "SessionScope",
    "ValueAddress",
    "check_part",
    "encode_scope_id",
    "ephemeral_scope",
    "list_address",
    "value",
]

#: Longest percent-encoded scope id: it becomes part of a side file name
#: (``scope-<id>.scope``) and must stay well under the usual 255-byte limit.
MAX_ENCODED_SCOPE_ID = 180


@record(frozen=True, slots=True)
class SessionScope:
    """The session scope: the main log, settled history. Use the :data:`SESSION` constant."""

    def __repr__(self) -> str:
        return "SESSION"


#: The session scope (the default scope of every address).
SESSION = SessionScope()


def encode_scope_id(id: str) -> str:
    """Return the on-disk form of a scope id: percent-encoding of its UTF-8 bytes,
    with no character left unescaped except ``A-Z a-z 0-9 _ . - ~``."""
    return urllib.parse.quote(id, safe="")


def _check_scope_id(id: object) -> None:
    if not isinstance(id, str):
        raise ScopeError(
            f"scope id must be a str, got {type(id).__name__} {id!r}; pass the operation id as text"
        )
    if not id:
        raise ScopeError("scope id must be non-empty; pass the operation id")
    if "\x00" in id:
        raise ScopeError(
            f"scope id {id!r} contains a NUL character; not every backend can store it"
        )
    bad = lone_surrogate(id)
    if bad is not None:
        raise ScopeError(
            f"scope id {id!r} contains a lone surrogate {id[bad]!r} at index "
            f"{bad}; scope ids must be valid Unicode"
        )
    encoded = encode_scope_id(id)
    if len(encoded) > MAX_ENCODED_SCOPE_ID:
        raise ScopeError(
            f"scope id {id[:40]!r}... is {len(encoded)} characters after percent-encoding "
            f"(limit {MAX_ENCODED_SCOPE_ID}); use a shorter id, e.g. a hash of it"
        )


@record(frozen=True, slots=True)
class EphemeralScope:
    """A named, reusable lifetime (usually one operation's scaffolding).

    Build it with :func:`ephemeral_scope`; the id is validated either way.
    Retiring it (:func:`~toolfold.storage.retire_scope`) ends the current lifetime;
    later writes to the same id start a new one.
    """

    id: str

    def __post_init__(self) -> None:
        _check_scope_id(self.id)

    def __repr__(self) -> str:
        return f"ephemeral_scope({self.id!r})"


Scope: TypeAlias = SessionScope | EphemeralScope

Sc = TypeVar("Sc", bound=Scope)


def ephemeral_scope(id: str) -> EphemeralScope:
    """Return the ephemeral scope named ``id``.

    Raises :class:`ScopeError` if ``id`` is empty, holds a lone surrogate, or is longer
    than 180 characters once percent-encoded.
    """
    return EphemeralScope(id)


def check_part(kind: str, what: str, text: object, *, allow_empty: bool) -> None:
    if not isinstance(text, str):
        raise StorageError(f"{kind} {what} must be a str, got {type(text).__name__} {text!r}")
    if not allow_empty and not text:
        raise StorageError(f"{kind} {what} must be non-empty")
    if "\x00" in text:
        raise StorageError(
            f"{kind} {what} {text!r} contains a NUL character; not every backend can store it"
        )
    bad = lone_surrogate(text)
    if bad is not None:
        raise StorageError(
            f"{kind} {what} {text!r} contains a lone surrogate at index {bad}; "
            "addresses must be valid Unicode"
        )


def _check_scope(kind: str, scope: object) -> None:
    if not isinstance(scope, SessionScope | EphemeralScope):
        raise ScopeError(f"{kind} scope must be SESSION or ephemeral_scope(id), got {scope!r}")


@record(frozen=True, slots=True)
class ValueAddress(Generic[Sc]):
    """The address of a stored JSON value: ``(namespace, key)`` within a scope."""

    namespace: str
    key: str
    scope: Sc

    def __post_init__(self) -> None:
        check_part("value", "namespace", self.namespace, allow_empty=False)
        check_part("value", "key", self.key, allow_empty=True)
        _check_scope("value", self.scope)

    def __str__(self) -> str:
        return f"value {self.namespace!r}/{self.key!r} in {self.scope!r}"


@record(frozen=True, slots=True)
class ListAddress(Generic[Sc]):
    """The address of a stored list of opaque JSON elements, each with an optional tag."""

    namespace: str
    key: str
    scope: Sc

    def __post_init__(self) -> None:
        check_part("list", "namespace", self.namespace, allow_empty=False)
        check_part("list", "key", self.key, allow_empty=True)
        _check_scope("list", self.scope)

    def __str__(self) -> str:
        return f"list {self.namespace!r}/{self.key!r} in {self.scope!r}"


@overload
def value(namespace: str, key: str) -> ValueAddress[SessionScope]: ...
@overload
def value(namespace: str, key: str, scope: Sc) -> ValueAddress[Sc]: ...
def value(namespace: str, key: str, scope: Scope = SESSION) -> ValueAddress[Any]:
    """Return the address of value ``key`` in ``namespace`` (session scope by default)."""
    return ValueAddress(namespace, key, scope)


@overload
def list_address(namespace: str, key: str) -> ListAddress[SessionScope]: ...
@overload
def list_address(namespace: str, key: str, scope: Sc) -> ListAddress[Sc]: ...
def list_address(namespace: str, key: str, scope: Scope = SESSION) -> ListAddress[Any]:
    """Return the address of list ``key`` in ``namespace`` (session scope by default).

    Named ``list_address`` so that it never shadows the builtin ``list``.
    """
    return ListAddress(namespace, key, scope)
