"""Op vocabulary of Chord: type aliases, integer/segment rules, JSON checks and the two validators."""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeAlias

from ._errors import JSONValueError, ShapeError, UnsafePathError

__all__ = [
    "ALLOWED_VALUES",
    "JSON",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "OP_VERBS",
    "RESERVED_SEGMENTS",
    "Batch",
    "NotJSON",
    "Op",
    "Path",
    "Segment",
    "WireBatch",
    "WireOp",
    "as_index",
    "check_json",
    "check_op",
    "copy_json",
    "describe",
    "is_base",
    "json_copier",
    "lone_surrogate",
    "raise_not_json",
    "validate_op",
    "validate_wire_op",
]

JSON: TypeAlias = Any
"""A value Chord replicates (and storage stores): ``None``, ``bool``, an ``int`` within
±:data:`MAX_SAFE_INTEGER`, a finite ``float``, a ``str`` without lone surrogates, a ``list``, a
``dict`` with such ``str`` keys; at most :data:`MAX_DEPTH` containers deep. See
:func:`check_json`. (``Any`` because a recursive alias would make ``dict[str, int]``
unassignable.)"""

Segment: TypeAlias = str | int
"""One path step: an object key (``str``) or an array index (an ``int`` in
``0..MAX_SAFE_INTEGER``)."""

Path: TypeAlias = list[Segment]
"""Where an op applies; ``[]`` is the root (only ``p`` and ``m`` may target it)."""

Op: TypeAlias = list[Any]
"""A decoded op, e.g. ``["a", ["content", 0, "text"], "chunk"]`` (long form, inline path)."""

WireOp: TypeAlias = list[Any]
"""An encoded op: long or short form, a path or an interned id, or a ``["#", id, path]``."""

Batch: TypeAlias = list[Op]
"""One flush: a list of ops. A base batch starts with ``r``."""

WireBatch: TypeAlias = list[WireOp]
"""One encoded flush."""

RESERVED_SEGMENTS: frozenset[str] = frozenset({"__proto__", "constructor", "prototype"})
"""Path segments every Chord producer and applier refuses (JavaScript replicas walk paths with
``obj[key]``; these names reach the prototype chain there)."""

OP_VERBS: frozenset[str] = frozenset("rsdatpm")
"""The seven verbs of the decoded vocabulary (the wire adds ``#``)."""

MAX_SAFE_INTEGER = 2**53 - 1
"""The largest integer a value, an index, a count or an id may hold (and ``-MAX_SAFE_INTEGER``
the smallest value): JavaScript's ``Number.MAX_SAFE_INTEGER``. Every JavaScript replica reads
numbers as doubles, which round integers beyond it (``2**53 + 1`` arrives as ``2**53``), so a
larger integer would fold to a different value there; it is refused instead. Integers travel
exactly up to here."""

MAX_DEPTH = 250
"""Deepest container nesting of a replicated value, counted from its root (``[]`` is 1 deep).

Enforced on every write a producer records and on every batch a replica applies (a path of
length ``k`` plus the depth of the payload written there), so no sequence of batches can grow a
replica beyond it. The JSON encoders storage and transport use accept 254 levels: a value plus
the envelope of a wire batch (the batch and its op) fits. It also keeps the recursive copy far
from Python's recursion limit: a forged payload gets a ``ShapeError``, never a
``RecursionError``."""

_VERB_LIST = "r, s, d, a, t, p, m"
_MAX_SHOWN = 160


_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxlist = _REPR.maxtuple = _REPR.maxset = _REPR.maxfrozenset = _REPR.maxdict = 8
_REPR.maxstring = 60
_REPR.maxother = 60
_REPR.maxlong = 40


def describe(value: Any) -> str:
    """Short, safe text for a value inside an error message (bounded work; never raises).

    ``reprlib`` limits depth and width, so describing a forged 50 MB payload or a deeply
    nested one costs next to nothing.
    """
    try:
        text = _REPR.repr(value)
    except Exception:  # a hostile __repr__ must not replace the real error
        text = f"<{type(value).__name__}>"
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 3] + "..."
    return text


def as_index(value: Any) -> int | None:
    """``value`` as a non-negative integer field, or ``None`` when it is not one.

    Integer fields (indices, counts, ids, path segments) accept a JSON integer or a
    whole-valued float (``1.0``, what JavaScript cannot tell apart from ``1``), never a bool,
    and only up to :data:`MAX_SAFE_INTEGER`: beyond it a JavaScript replica reads a different
    number (``2**53 + 1`` as ``2**53``, and ``1e21`` spells the key ``"1e+21"``), so Python and
    JavaScript could address different slots. Both refuse such a field instead.
    """
    t = type(value)
    if t is int:
        return value if 0 <= value <= MAX_SAFE_INTEGER else None
    if t is float:
        if value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER:
            return int(value)
        return None
    return None


def _int_text(value: int) -> str:
    # str() of an int over 4300 digits raises ValueError: say how big it is instead.
    return str(value) if value.bit_length() < 256 else f"with {value.bit_length()} bits"


def is_base(batch: Sequence[Any]) -> bool:
    """True when ``batch`` (decoded or wire) starts with ``r``: it replaces the whole value.

    Exactly ``len(batch) > 0 and batch[0][0] == "r"``; never raises (garbage is not a base).
    """
    try:
        return len(batch) > 0 and batch[0][0] == "r"
    except Exception:
        return False


# -- JSON values -------------------------------------------------------------------------------


class NotJSON(Exception):
    """Internal: carries the reason and the location (innermost first) out of the recursion;
    each caller turns it into its own :class:`JSONValueError` message."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.loc: list[Segment] = []


def json_copier(
    unwrap: Callable[[Any], Any] | None = None, too_deep: str = "", max_depth: int = MAX_DEPTH
) -> Callable[[Any, int], Any]:
    """The validating JSON copy walk: ``copy(value, depth)`` returns a fresh copy or raises
    :class:`NotJSON`. ``depth`` is how deep ``value`` already sits (``MAX_DEPTH`` counts it).

    ``unwrap`` lets a producer accept its own container proxies (the tracker's): it is asked
    only about a value that is no JSON type, and returns the plain container behind it (which
    is walked and copied in its place, at the same depth) or ``None`` to refuse the value.
    Asking only there keeps the plain-JSON paths free of the hook. ``too_deep`` is added to
    the message for nesting beyond ``max_depth``.
    """

    def copy(value: Any, depth: int) -> Any:
        # Exact type checks on purpose: a str/int/dict subclass (enums, OrderedDict, ...) would
        # serialise differently or not at all; bool is checked before int because it is one.
        # The common scalars (None, bool, ASCII str, small int) pass the inline checks in the
        # container loops below without a call; everything else comes here.
        t = type(value)
        if t is bool or value is None:
            return value
        if t is str:
            if _is_valid_unicode(value):
                return value
            raise NotJSON(
                f"string {describe(value)} holds a lone surrogate at index "
                f"{lone_surrogate(value)} (not valid Unicode, so it has no UTF-8 form)"
            )
        if t is int:
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return value
            raise NotJSON(
                f"integer {_int_text(value)} is beyond ±{MAX_SAFE_INTEGER} (2**53 - 1), where "
                f"JavaScript replicas would round it; send it as a str"
            )
        if t is float:
            if math.isfinite(value):
                return value
            raise NotJSON(f"{value!r} is not a finite number (JSON has no NaN or infinity)")
        if depth >= max_depth:
            raise NotJSON(f"containers are nested deeper than {max_depth} levels{too_deep}")
        if t is list:
            out: list[Any] = []
            append = out.append
            for i, item in enumerate(value):
                ti = type(item)
                if (
                    item is None
                    or ti is bool
                    or (ti is str and item.isascii())
                    or (ti is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
                ):
                    append(item)
                    continue
                try:
                    append(copy(item, depth + 1))
                except NotJSON as exc:
                    exc.loc.append(i)
                    raise
            return out
        if t is dict:
            obj: dict[str, Any] = {}
            for key, item in value.items():
                if type(key) is not str:
                    raise NotJSON(f"object key {describe(key)} is not a str")
                if not key.isascii() and not _is_valid_unicode(key):  # ASCII: no call
                    raise NotJSON(f"object key {describe(key)} holds a lone surrogate")
                ti = type(item)
                if (
                    item is None
                    or ti is bool
                    or (ti is str and item.isascii())
                    or (ti is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
                ):
                    obj[key] = item
                    continue
                try:
                    obj[key] = copy(item, depth + 1)
                except NotJSON as exc:
                    exc.loc.append(key)
                    raise
            return obj
        if unwrap is not None:
            plain = unwrap(value)
            if plain is not None:
                return copy(plain, depth)
        hint = " (use a list)" if t in (tuple, set, frozenset) else ""
        raise NotJSON(f"{t.__name__} {describe(value)} is not a JSON value{hint}")

    return copy


_copy = json_copier()


def _is_valid_unicode(text: str) -> bool:
    """Whether ``text`` holds no lone surrogate. The strict UTF-8 encoder answers that
    several times faster than a regex scan of a non-ASCII string (it refuses exactly the
    surrogates)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def lone_surrogate(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (not valid Unicode), or ``None``:
    where the strict UTF-8 encoder, which refuses exactly the surrogates, stops."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def _allowed(max_depth: int) -> str:
    return (
        f"a value is None, bool, an int within ±{MAX_SAFE_INTEGER}, a finite float, a str "
        f"without lone surrogates, a list, or a dict with such str keys, at most {max_depth} "
        f"levels deep"
    )


ALLOWED_VALUES = _allowed(MAX_DEPTH)
"""The definition of a replicable (and storable) value, as error messages state it."""


def raise_not_json(
    exc: NotJSON, path: Sequence[Any], what: str, max_depth: int = MAX_DEPTH
) -> NoReturn:
    """Raise the :class:`JSONValueError` for ``exc``: ``what`` at the path of the bad part
    (``path``, where the walked value sits, then where inside it the walk stopped)."""
    where = [*path, *reversed(exc.loc)]
    raise JSONValueError(
        f"{what} at path {describe(where)}: {exc.reason}; {_allowed(max_depth)}",
        path=where,
    ) from None


def copy_json(value: Any, path: Sequence[Any] = (), what: str = "value", depth: int = 0) -> Any:
    """A fresh copy of the JSON value ``value`` (strings and numbers are shared: immutable).

    Raises :class:`JSONValueError` (a ``ChordError`` and a ``TypeError``) naming the path of the
    first non-JSON part; ``path`` is where ``value`` itself sits, for the message. ``depth`` is
    how many containers already enclose ``value`` in the value it is written into (they count
    towards :data:`MAX_DEPTH`).
    """
    try:
        return _copy(value, depth)
    except NotJSON as exc:
        raise_not_json(exc, path, what)
    except RecursionError:  # only when the caller's own stack is already nearly exhausted
        raise JSONValueError(
            f"{what} at path {describe(list(path))} is too deeply nested to copy", path=list(path)
        ) from None


_checkers: dict[int, Callable[[Any, int], Any]] = {}


def check_json(value: Any, path: Sequence[Any] = (), *, max_depth: int = MAX_DEPTH) -> None:
    """Check that ``value`` is a value Chord can replicate and storage can store; raise
    :class:`JSONValueError` naming the path of the first bad part.

    This is the one definition both layers use: ``None``, ``bool``, an ``int`` within
    ±:data:`MAX_SAFE_INTEGER`, a finite ``float``, a ``str`` without lone surrogates, a
    ``list``, a ``dict`` with such ``str`` keys, at most ``max_depth`` containers deep
    (:data:`MAX_DEPTH` unless a caller adds room for an envelope it wraps values in). Exact
    types: subclasses (enums, ``OrderedDict``), ``tuple``, ``set``, ``bytes`` and cycles are
    refused (cycles by the depth bound).

    Signature for producers: ``check_json(value, path)`` where ``path`` is the path ``value``
    is being written to (it is only used in the message).
    """
    if max_depth == MAX_DEPTH:
        checker = _copy
    else:
        checker = _checkers.get(max_depth) or _checkers.setdefault(
            max_depth, json_copier(max_depth=max_depth)
        )
    try:
        checker(value, 0)
    except NotJSON as exc:
        raise_not_json(exc, path, "value", max_depth)
    except RecursionError:
        raise JSONValueError(
            f"value at path {describe(list(path))} is too deeply nested to check",
            path=list(path),
        ) from None


# -- ops -----------------------------------------------------------------------------------------


def _shape(message: str, where: str, op: Any) -> NoReturn:
    raise ShapeError(f"{message} at {where}: {describe(op)}")


def _segment(seg: Any, path: Any, where: str) -> Segment:
    if type(seg) is str:
        if seg in RESERVED_SEGMENTS:
            raise UnsafePathError(
                f"unsafe path segment: {seg!r} in path {describe(path)} at {where}; "
                f"{', '.join(sorted(RESERVED_SEGMENTS))} are refused as path segments "
                f"(JavaScript replicas would reach the prototype); write the value inside "
                f"its parent's payload instead",
                segment=seg,
            )
        return seg
    index = as_index(seg)
    if index is None:
        raise UnsafePathError(
            f"unsafe path segment: {describe(seg)} in path {describe(path)} at {where}; "
            f"a segment is a str key or an integer index in 0..{MAX_SAFE_INTEGER}",
            segment=seg,
        )
    return index


def check_path(path: Any, where: str) -> Path:
    """Validate a path (list of segments) and return it with integer segments normalised."""
    if type(path) is not list and type(path) is not tuple:
        raise ShapeError(f"path is not an array at {where}: {describe(path)}")
    out: Path = []
    for seg in path:
        if type(seg) is str and seg not in RESERVED_SEGMENTS:
            out.append(seg)
        else:
            out.append(_segment(seg, path, where))
    return out


def _check_perm(perm: Any, where: str, op: Any) -> list[int]:
    if type(perm) is not list and type(perm) is not tuple:
        _shape("m permutation is not an array", where, op)
    n = len(perm)
    seen = bytearray(n)
    out: list[int] = []
    for p in perm:
        i = as_index(p)
        if i is None or i >= n or seen[i]:
            _shape(
                f"m permutation is not a bijection of 0..{n - 1} (bad entry {describe(p)})",
                where,
                op,
            )
        seen[i] = 1
        out.append(i)
    return out


def _count(value: Any, message: str, where: str, op: Any) -> int:
    n = as_index(value)
    if n is None:
        _shape(
            f"{message} must be a non-negative integer, got {describe(value)} (integer fields "
            f"go up to {MAX_SAFE_INTEGER}, JavaScript's largest exact integer)",
            where,
            op,
        )
    return n


def check_op(op: Any, where: str = "op") -> Op:
    """Validate a decoded op and return it normalised (a fresh list, integer fields as ``int``).

    Payloads are not copied here (``apply`` copies them); ``where`` names the op in messages.
    """
    if type(op) is not list and type(op) is not tuple:
        _shape("op is not an array", where, op)
    n = len(op)
    if n == 0:
        _shape("op is empty (expected [verb, ...])", where, op)
    verb = op[0]
    if verb == "s" and type(verb) is str:
        if n != 3:
            _shape("s arity: expected ['s', path, value]", where, op)
        path = check_path(op[1], where)
        if not path:
            _shape("path is empty: s needs a non-empty path (use r to replace the root)", where, op)
        return ["s", path, op[2]]
    if verb == "a" and type(verb) is str:
        if n != 3:
            _shape("a shape: expected ['a', path, text]", where, op)
        path = check_path(op[1], where)
        if not path:
            _shape("path is empty: a needs a non-empty path", where, op)
        if type(op[2]) is not str:
            _shape(f"a value must be a str, got {describe(op[2])}", where, op)
        return ["a", path, op[2]]
    if verb == "p" and type(verb) is str:
        if n != 5:
            _shape("p arity: expected ['p', path, index, remove, items]", where, op)
        path = check_path(op[1], where)
        index = _count(op[2], "p index", where, op)
        remove = _count(op[3], "p remove", where, op)
        if type(op[4]) is not list and type(op[4]) is not tuple:
            _shape(f"p items must be a list, got {describe(op[4])}", where, op)
        return ["p", path, index, remove, op[4]]
    if verb == "r" and type(verb) is str:
        if n != 2:
            _shape("r arity: expected ['r', value]", where, op)
        return ["r", op[1]]
    if verb == "t" and type(verb) is str:
        if n != 3:
            _shape("t shape: expected ['t', path, count]", where, op)
        path = check_path(op[1], where)
        if not path:
            _shape("path is empty: t needs a non-empty path", where, op)
        return ["t", path, _count(op[2], "t count", where, op)]
    if verb == "d" and type(verb) is str:
        if n != 2:
            _shape("d arity: expected ['d', path]", where, op)
        path = check_path(op[1], where)
        if not path:
            _shape("path is empty: d needs a non-empty path", where, op)
        return ["d", path]
    if verb == "m" and type(verb) is str:
        if n != 3:
            _shape("m arity: expected ['m', path, permutation]", where, op)
        path = check_path(op[1], where)
        return ["m", path, _check_perm(op[2], where, op)]
    _shape(f"unknown op verb: {describe(verb)} (expected one of {_VERB_LIST})", where, op)


def validate_op(op: Any) -> None:
    """Check one decoded op (long form, inline path; no ids, no short forms, no ``#``).

    Raises :class:`ShapeError` for a malformed op and :class:`UnsafePathError` for a reserved
    or invalid segment. Values inside payloads are checked by ``apply`` when it copies them.
    """
    check_op(op)


# Wire grammar: verb -> arities of the short form and of the long form.
_WIRE_ARITY: dict[str, tuple[int, int]] = {
    "r": (2, 2),
    "s": (2, 3),
    "d": (1, 2),
    "a": (2, 3),
    "t": (2, 3),
    "p": (4, 5),
    "m": (2, 3),
}


def check_wire_op(op: Any, where: str = "op") -> tuple[str, Any, list[Any]]:
    """Validate one wire op; return ``(verb, target, args)``.

    ``target`` is ``None`` for a short form (and for ``r``), an ``int`` id, or a normalised path
    (``list``); for ``#`` it is the id and ``args`` is ``[path]``.
    """
    if type(op) is not list and type(op) is not tuple:
        _shape("op is not an array", where, op)
    n = len(op)
    if n == 0:
        _shape("op is empty (expected [verb, ...])", where, op)
    verb = op[0]
    if type(verb) is not str:
        _shape(f"unknown op verb: {describe(verb)} (expected one of {_VERB_LIST}, #)", where, op)
    if verb == "#":
        ident = as_index(op[1]) if n == 3 else None
        if ident is None or (type(op[2]) is not list and type(op[2]) is not tuple):
            _shape("# shape: expected ['#', id (non-negative integer), path]", where, op)
        return "#", ident, [check_path(op[2], where)]
    arity = _WIRE_ARITY.get(verb)
    if arity is None:
        _shape(f"unknown op verb: {describe(verb)} (expected one of {_VERB_LIST}, #)", where, op)
    short, long = arity
    if n != short and n != long:
        _shape(f"{verb} arity: {n} elements (expected {short} or {long})", where, op)
    if verb == "r":
        return "r", None, [op[1]]
    if n == long:
        raw = op[1]
        if type(raw) is list or type(raw) is tuple:
            target: Any = check_path(raw, where)
        else:
            target = as_index(raw)
            if target is None:
                _shape(f"path is not an array (nor a path id): {describe(raw)}", where, op)
        args = list(op[2:])
    else:
        target = None
        args = list(op[1:])
    if verb == "a":
        if type(args[0]) is not str:
            _shape(f"a value must be a str, got {describe(args[0])}", where, op)
    elif verb == "t":
        args[0] = _count(args[0], "t count", where, op)
    elif verb == "p":
        args[0] = _count(args[0], "p index", where, op)
        args[1] = _count(args[1], "p remove", where, op)
        if type(args[2]) is not list and type(args[2]) is not tuple:
            _shape(f"p items must be a list, got {describe(args[2])}", where, op)
    elif verb == "m":
        args[0] = _check_perm(args[0], where, op)
    return verb, target, args


def validate_wire_op(op: Any) -> None:
    """Check one wire op in isolation (long or short form, path or id, or ``#``).

    Whether a short form has a previous path or an id is defined is the decoder's business
    (``PathError`` there); this checks verb, arity and field types.
    """
    check_wire_op(op)
