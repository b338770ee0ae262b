"""The writes a transaction is made of, the JSON they carry, and the one-scope rule."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Generic, TypeAlias

from toolfold._record import record
from toolfold.chord import JSONValueError
from toolfold.chord import check_json as chord_check_json

from ._addresses import (
    SESSION,
    EphemeralScope,
    ListAddress,
    Sc,
    Scope,
    SessionScope,
    ValueAddress,
    check_part,
)
from ._errors import InvalidValueError, ScopeError, StorageError

__all__ = [
    "JSON",
    "AppendEntry",
    "AppendList",
    "DeleteList",
    "DeleteValue",
    "EphemeralWrite",
    "Expect",
    "JSONLike",
    "RetireScope",
    "SessionWrite",
    "SetValue",
    "Write",
    "append_entry",
    "append_list",
    "check_json",
    "delete_list",
    "delete_value",
    "expect",
    "retire_scope",
    "scope_of",
    "set_value",
]

#: A JSON value as storage returns it.
JSON: TypeAlias = "bool | int | float | str | list[JSON] | dict[str, JSON] | None"
#: A JSON value as storage accepts it. Typed with ``Sequence`` / ``Mapping`` because ``list``
#: is invariant (a ``list[list[Any]]`` is no ``list[JSON]``); at run time only ``list`` and
#: ``dict`` are values (a tuple would read back as a ``list``, so it is refused as in Chord).
JSONLike: TypeAlias = (
    "bool | int | float | str | Sequence[JSONLike] | Mapping[str, JSONLike] | None"
)

# What storage can hold is what Chord can replicate (toolfold.chord.check_json: integers within
# ±(2**53 - 1), finite floats, valid Unicode, exact JSON types), so a value a tool or a model
# produced is refused where it is written, with its path, never half-way through a batch. The
# depth bound is orjson's (254 levels; the standard library's json, which toolfold._json may
# choose instead, goes deeper), which leaves room around a replicated value (at most
# chord.MAX_DEPTH = 250 deep) for the wire batch and op that carry it.
MAX_DEPTH = 254


def check_json(value: object, what: str) -> None:
    """Raise :class:`InvalidValueError` unless ``value`` is a value storage can hold.

    ``what`` names the write (e.g. ``"set_value of value 'ns'/'k' in SESSION"``) so the
    message says where the bad part is. The definition is Chord's (``toolfold.chord.check_json``,
    stated in docs/protocol.md): ``None``, ``bool``, ``int`` within ±(2**53 - 1), finite
    ``float``, ``str`` without lone surrogates, ``list``, ``dict`` with such ``str`` keys, nested
    at most 254 levels.
    """
    try:
        chord_check_json(value, max_depth=MAX_DEPTH)
    except JSONValueError as exc:
        raise InvalidValueError(
            f"{what}: {exc} — nothing of this transaction was committed"
        ) from None


@record(frozen=True, slots=True)
class SetValue(Generic[Sc]):
    """Set the value at ``address`` to ``value`` (replacing any previous value)."""

    address: ValueAddress[Sc]
    value: JSONLike


@record(frozen=True, slots=True)
class DeleteValue(Generic[Sc]):
    """Delete the value at ``address`` (no error if it is missing)."""

    address: ValueAddress[Sc]


@record(frozen=True, slots=True)
class AppendList(Generic[Sc]):
    """Append ``element`` (opaque JSON) to the list at ``address``, with an optional tag."""

    address: ListAddress[Sc]
    element: JSONLike
    tag: str | None = None

    def __post_init__(self) -> None:
        tag = self.tag
        if tag is not None and (
            not isinstance(tag, str) or not tag or "\x00" in tag or not tag.isprintable()
        ):
            raise StorageError(
                f"append_list to {self.address}: tag must be None or a non-empty str of "
                f"printable characters, got {tag!r}"
            )


@record(frozen=True, slots=True)
class DeleteList(Generic[Sc]):
    """Delete the whole list at ``address`` (no error if it is missing)."""

    address: ListAddress[Sc]


@record(frozen=True, slots=True)
class AppendEntry:
    """Append ``entry`` to the settled transcript (always session scope).

    ``key`` (optional, opaque to storage) indexes the entry: ``entries_by_key`` finds it
    and ``read_entries(keyed=True)`` pages only keyed entries, without reading the
    others. ``summary`` (optional JSON) is a small stand-in a listing reads instead of
    the entry itself (``read_entries(summaries=True)``).
    """

    entry: JSONLike
    key: str | None = None
    summary: JSONLike = None


@record(frozen=True, slots=True)
class RetireScope:
    """End the current lifetime of ``scope``: everything of it with a smaller seq is dead.

    A session-scope write: it commits together with the settled result entries.
    """

    scope: EphemeralScope

    def __post_init__(self) -> None:
        if not isinstance(self.scope, EphemeralScope):
            raise ScopeError(
                f"retire_scope needs an ephemeral_scope(id), got {self.scope!r}; "
                "the session scope cannot be retired"
            )


#: A write that belongs to the session scope.
SessionWrite: TypeAlias = (
    SetValue[SessionScope]
    | DeleteValue[SessionScope]
    | AppendList[SessionScope]
    | DeleteList[SessionScope]
    | AppendEntry
    | RetireScope
)
#: A write that belongs to an ephemeral scope.
EphemeralWrite: TypeAlias = (
    SetValue[EphemeralScope]
    | DeleteValue[EphemeralScope]
    | AppendList[EphemeralScope]
    | DeleteList[EphemeralScope]
)
#: Any write.
Write: TypeAlias = (
    SetValue[Any] | DeleteValue[Any] | AppendList[Any] | DeleteList[Any] | AppendEntry | RetireScope
)

_WRITE_TYPES = (SetValue, DeleteValue, AppendList, DeleteList, AppendEntry, RetireScope)


def set_value(address: ValueAddress[Sc], value: JSONLike) -> SetValue[Sc]:
    """Return a write setting ``address`` to ``value``."""
    return SetValue(address, value)


def delete_value(address: ValueAddress[Sc]) -> DeleteValue[Sc]:
    """Return a write deleting the value at ``address``."""
    return DeleteValue(address)


def append_list(
    address: ListAddress[Sc], element: JSONLike, tag: str | None = None
) -> AppendList[Sc]:
    """Return a write appending ``element`` (with optional non-empty ``tag``) to a list."""
    return AppendList(address, element, tag)


def delete_list(address: ListAddress[Sc]) -> DeleteList[Sc]:
    """Return a write deleting the list at ``address``."""
    return DeleteList(address)


def append_entry(
    entry: JSONLike, *, key: str | None = None, summary: JSONLike = None
) -> AppendEntry:
    """Return a write appending ``entry`` to the settled transcript, indexed under
    ``key`` (e.g. a tool call id) with an optional small ``summary`` for listings."""
    return AppendEntry(entry, key, summary)


def retire_scope(scope: EphemeralScope) -> RetireScope:
    """Return the (session-scope) write retiring ``scope``."""
    return RetireScope(scope)


def write_scope(write: Write) -> Scope:
    """Return the scope a single write belongs to."""
    if isinstance(write, AppendEntry | RetireScope):
        return SESSION
    if isinstance(write, SetValue | DeleteValue | AppendList | DeleteList):
        scope: Scope = write.address.scope
        return scope
    raise StorageError(
        f"not a storage write: {type(write).__name__} {write!r:.80}; build writes with "
        "set_value(), delete_value(), append_list(), delete_list(), append_entry(), "
        "retire_scope()"
    )


def describe(write: Write) -> str:
    """Return a short human description of a write, for error messages."""
    if isinstance(write, AppendEntry):
        return "append_entry"
    if isinstance(write, RetireScope):
        return f"retire_scope({write.scope.id!r})"
    verb = {
        SetValue: "set_value",
        DeleteValue: "delete_value",
        AppendList: "append_list",
        DeleteList: "delete_list",
    }[type(write)]
    return f"{verb} of {write.address}"


def scope_of(writes: Iterable[Write]) -> Scope:
    """Return the one scope all ``writes`` belong to.

    Raises :class:`ScopeError` for a mixed transaction (two files cannot be written
    atomically, so storage refuses to pretend they can), and :class:`StorageError`
    for an empty one or a non-write.
    """
    ws = list(writes)
    first: Scope | None = None
    first_index = 0
    for i, w in enumerate(ws):
        s = write_scope(w)
        if first is None:
            first, first_index = s, i
        elif s != first:
            raise ScopeError(
                f"a transaction must stay in one scope: write {first_index} "
                f"({describe(ws[first_index])}) is in {first!r} but write {i} "
                f"({describe(w)}) is in {s!r}; commit them as two transactions"
            )
    if first is None:
        raise StorageError("scope_of needs at least one write")
    return first


def _check_payload(value: object, i: int, w: Write, part: str = "") -> None:
    try:
        chord_check_json(value, max_depth=MAX_DEPTH)
    except JSONValueError:
        check_json(value, f"write {i} ({describe(w)}){part}")  # raises, with the message


def check_writes(writes: Sequence[Write]) -> None:
    """Validate every write's payload (JSON) — raises before anything is committed."""
    for i, w in enumerate(writes):
        if not isinstance(w, _WRITE_TYPES):
            write_scope(w)  # raises the descriptive error
        # The write is described only for an error: its description costs more than
        # the check of a small value.
        if isinstance(w, SetValue):
            _check_payload(w.value, i, w)
        elif isinstance(w, AppendList):
            _check_payload(w.element, i, w)
        elif isinstance(w, AppendEntry):
            _check_payload(w.entry, i, w)
            _check_payload(w.summary, i, w, " summary")
            if w.key is not None:
                check_part(f"write {i} ({describe(w)})", "key", w.key, allow_empty=False)


@record(frozen=True, slots=True)
class Expect:
    """A commit precondition: the value at ``address`` (session scope) must be ``value``
    (``None``: no value there) when the transaction commits, else the commit raises
    :class:`ConflictError` and writes nothing.

    Values compare as their encoded JSON, so storage never interprets them: it is an
    equality on opaque stored text, checked inside the commit's transaction."""

    address: ValueAddress[SessionScope]
    value: JSONLike

    def __post_init__(self) -> None:
        if not isinstance(self.address, ValueAddress) or self.address.scope != SESSION:
            raise ScopeError(
                f"expect needs a value(namespace, key) address in SESSION scope, got "
                f"{self.address!r}; preconditions on ephemeral scopes are not supported"
            )
        check_json(self.value, f"expect of {self.address}")


def expect(address: ValueAddress[SessionScope], value: JSONLike) -> Expect:
    """Return a commit precondition: "the value at ``address`` is ``value``" (``None``:
    missing). Pass it as ``session.commit(writes, expect=[...])``."""
    return Expect(address, value)
