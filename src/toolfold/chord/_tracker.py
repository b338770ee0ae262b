"""The tracker: ``track(value)`` watches plain dicts/lists/strings and records Chord ops.

How it works (the rules are in ``docs/tracker.md``):

* The tracked value (``Tracker.target``) stays plain. ``Tracker.state`` hands out proxies
  (:class:`TrackedDict`, :class:`TrackedList`), one canonical proxy per container, created
  lazily on access; a proxy is also the *node* that holds that container's pending records.
* Pending changes live on the nodes, never as paths: a dict node keeps one record per key
  (``_SET``, ``_DEL`` or a string anchor), a list node keeps its splices/permutations in call
  order plus one record per current index. Paths are computed only at flush, walking down
  from the root through the touched nodes, so reindexing never leaves a stale path.
* A container is *fresh* when its whole current value will be emitted anyway (it sits under
  a pending ``s``, an inserted splice item, or a pending ``r``); writes inside it record
  nothing - they fold into that payload, which is copied from the live value at flush.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSequence
from typing import Any, NoReturn, SupportsIndex, cast, overload

from ._errors import ChordError, JSONValueError, PathError, UnsafePathError
from ._ops import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    RESERVED_SEGMENTS,
    NotJSON,
    Op,
    describe,
    json_copier,
    raise_not_json,
)
from ._strdiff import string_ops

__all__ = ["PENDING_LIMIT", "TrackedDict", "TrackedList", "Tracker", "track"]

PENDING_LIMIT = 4096
"""Past this many pending records / touched nodes the next flush is one ``r`` instead."""

_MISSING: Any = object()


class _Rec:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


# Field records. A field record that is a `str` is a string slot: the anchor, i.e. the value
# the replica holds (the value before the first write since the last flush).
_SET = _Rec("SET")  # emit ["s", path, <live value>] at flush
_DEL = _Rec("DEL")  # emit ["d", path]


class _IndexPathError(PathError, IndexError):
    """A list index that would leave a hole (a ``PathError`` and an ``IndexError``)."""


# -- copying values in and out -------------------------------------------------------------------


def _plain(value: Any) -> Any:
    return value._o if isinstance(value, _Node) else None


# The validating copy of _ops.copy_json (exact types only), except that proxies of any tracker
# are unwrapped and copied, so the tracked value never shares a container with the caller or
# with another slot.
_importers: dict[int, Callable[[Any, int], Any]] = {}


def _importer(max_depth: int) -> Callable[[Any, int], Any]:
    found = _importers.get(max_depth)
    if found is None:
        found = _importers[max_depth] = json_copier(
            _plain, " (or the value contains itself)", max_depth
        )
    return found


def _imported(
    value: Any, node: _Node | None, key: Any = None, tracker: Tracker | None = None
) -> Any:
    """A validated private copy of ``value``, about to be written at ``node[key]`` (``node``
    None: the root of ``tracker``). The path is computed only for the error message."""
    t = type(value)
    if (
        value is None
        or t is bool
        or (t is str and value.isascii())
        or (t is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    ):
        return value
    owner = cast("Tracker", tracker) if node is None else node._t
    try:
        return owner._import(value, 0 if node is None else _depth_of(node) + 1)
    except NotJSON as exc:
        base = [] if node is None else [*_path_of(node), key]
        raise_not_json(exc, base, "cannot write to the tracked value")


def _copy(value: Any) -> Any:
    """Plain deep copy of an already-valid JSON value (for op payloads: no aliasing)."""
    t = type(value)
    if t is dict:
        return {
            k: (_copy(v) if type(v) is dict or type(v) is list else v) for k, v in value.items()
        }
    if t is list:
        return [(_copy(v) if type(v) is dict or type(v) is list else v) for v in value]
    return value


def _json_eq(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: ``True`` is not ``1`` and ``1`` is not ``1.0`` here."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is dict:
        if len(a) != len(b) or a != b:
            return False
        return all(_json_eq(v, b[k]) for k, v in a.items())
    if ta is list:
        if len(a) != len(b) or a != b:
            return False
        return all(_json_eq(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _same_scalar(a: Any, b: Any) -> bool:
    """``a == b`` already holds for two values of one type; floats also need the same
    sign (``-0.0`` and ``0.0`` serialise differently)."""
    return type(a) is not float or math.copysign(1.0, a) == math.copysign(1.0, b)


def _unwrap(value: Any) -> Any:
    return value._o if isinstance(value, _Node) else value


# -- nodes -----------------------------------------------------------------------------------------


class _Node:
    """State shared by both proxy kinds; see the module docstring."""

    __slots__ = ("_dead", "_dk", "_f", "_k", "_kids", "_log", "_o", "_p", "_t", "_touched")

    _o: Any

    def __init__(self, tracker: Tracker, obj: Any, parent: _Node | None, key: Any) -> None:
        self._t = tracker
        self._o = obj
        self._p = parent
        self._k = key
        self._kids: dict[Any, _Node] | None = None
        self._dead = False
        self._f: dict[Any, Any] | None = None  # field records
        self._log: list[Any] | None = None  # list nodes: splices [i, r, items] / ("m", perm)
        self._dk: dict[int, _Node] | None = None  # touched children by id (ordered)
        self._touched = False

    # Plain-container behaviour shared by both kinds.
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._o)

    def __eq__(self, other: object) -> bool:
        return bool(self._o == _unwrap(other))

    def __ne__(self, other: object) -> bool:
        return bool(self._o != _unwrap(other))

    def __len__(self) -> int:
        return len(self._o)

    def copy(self) -> Any:
        """A plain deep copy of this container (not tracked; shares nothing with it)."""
        return _copy(self._o)

    __copy__ = copy

    def __deepcopy__(self, memo: Any) -> Any:
        return _copy(self._o)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickling a proxy pickles its plain value, never the tracker.
        return (type(self._o), (_copy(self._o),))


def _path_of(node: _Node) -> list[Any]:
    path: list[Any] = []
    n: _Node | None = node
    while n is not None and n._p is not None:
        path.append(n._k)
        n = n._p
    path.reverse()
    return path


def _depth_of(node: _Node) -> int:
    depth = 0
    n = node._p
    while n is not None:
        depth += 1
        n = n._p
    return depth


def _detached(node: _Node) -> NoReturn:
    kind = "dict" if type(node._o) is dict else "list"
    path = _path_of(node)
    raise PathError(
        f"this {kind} is no longer part of the tracked value (it was removed or replaced; it "
        f"was last at path {describe(path)}): read it again from tracker.state before writing",
        path=path,
    )


def _reserved_on_path(node: _Node, key: str) -> NoReturn:
    path = _path_of(node)
    raise UnsafePathError(
        f"unsafe path segment: {key!r} in path {describe(path)}; JavaScript replicas refuse "
        f"it, so a container under a reserved key cannot be written through a path. Write the "
        f"enclosing object whole instead",
        segment=key,
    )


def _inserted(node: _Node, j: int) -> bool:
    """Was the element now at index ``j`` inserted by a splice pending on ``node``?"""
    log = node._log
    if not log:
        return False
    for e in reversed(log):
        if type(e) is list:
            i, r, items = e
            if j < i:
                continue
            n = len(items)
            if j < i + n:
                return True
            j += r - n
        else:
            j = e[1][j]
    return False


def _check(node: _Node) -> bool:
    """Raise if ``node`` is detached; return whether it is fresh (see module docstring).

    O(depth): identity checks up to the root, so a held proxy whose container was removed or
    replaced is refused instead of writing through a stale path.
    """
    t = node._t
    fresh = t._whole
    reserved: str | None = None
    n = node
    while True:
        if n._dead:
            _detached(node)
        p = n._p
        if p is None:
            if n is not t._root:
                _detached(node)
            if reserved is not None:
                _reserved_on_path(node, reserved)
            return fresh
        po = p._o
        k = n._k
        if type(po) is dict:
            if po.get(k, _MISSING) is not n._o:
                _detached(node)
            if k in RESERVED_SEGMENTS:
                reserved = k
        elif k >= len(po) or po[k] is not n._o:
            _detached(node)
        if not fresh:
            f = p._f
            if (f is not None and f.get(k) is _SET) or (p._log and _inserted(p, k)):
                fresh = True
        n = p


def _touch(t: Tracker, node: _Node) -> None:
    """Make ``node`` reachable from the root at flush (touched chain)."""
    n = node
    while not n._touched:
        n._touched = True
        t._touched.append(n)
        t._n += 1
        p = n._p
        if p is None:
            return
        dk = p._dk
        if dk is None:
            dk = p._dk = {}
        dk[id(n)] = n
        n = p


def _kid(node: _Node, key: Any, child: Any) -> _Node:
    kids = node._kids
    if kids is None:
        kids = node._kids = {}
    else:
        k = kids.get(key)
        if k is not None:
            if k._o is child:
                return k
            k._dead = True
    k = (TrackedDict if type(child) is dict else TrackedList)(node._t, child, node, key)
    kids[key] = k
    return k


def _drop_kid(node: _Node, key: Any) -> None:
    kids = node._kids
    if kids:
        k = kids.pop(key, None)
        if k is not None:
            k._dead = True


def _wrap(node: _Node, key: Any, value: Any) -> Any:
    t = type(value)
    if t is dict or t is list:
        return _kid(node, key, value)
    return value


def _mark_whole(t: Tracker, node: _Node) -> None:
    """Record that ``node``'s whole value replaces the replica's (``s`` at the parent, or
    ``r`` at the root). Caller checked that ``node`` is attached and not fresh."""
    p = node._p
    if p is None:
        t._whole = True
        t._cleanup()
        return
    f = p._f
    if f is None:
        f = p._f = {}
    if f.get(node._k) is not _SET:
        if node._k not in f:
            t._n += 1
        f[node._k] = _SET
    _touch(t, p)
    node._f = None
    node._log = None


def _rec_field(t: Tracker, node: _Node, key: Any, old: Any, new: Any) -> None:
    f = node._f
    if f is None:
        f = node._f = {}
    rec = f.get(key, _MISSING)
    if rec is _SET:
        return
    if type(new) is str and type(old) is str:
        if rec is _MISSING:
            f[key] = old  # the anchor: what the replica holds
            t._n += 1
            _touch(t, node)
        return
    if rec is _MISSING:
        t._n += 1
    f[key] = _SET
    _touch(t, node)


# -- the mutation primitives (all recording goes through these) -----------------------------------


def _set(t: Tracker, node: _Node, key: Any, new: Any) -> None:
    """``node._o[key] = new`` (``new`` already imported). Lists: ``0 <= key < len``."""
    obj = node._o
    old = obj.get(key, _MISSING) if type(obj) is dict else obj[key]
    to = type(old)
    fresh = _check(node)
    if to is type(new) and (to is dict or to is list):
        _diff(t, _kid(node, key, old), new)
        return
    if not fresh:
        f = node._f
        if (
            to is type(new)
            and old == new
            and (f is None or key not in f)
            and _same_scalar(old, new)
        ):
            return  # rewriting a value with itself: nothing to say
        log = node._log
        if log and type(obj) is list and _inserted(node, key):
            last = log[-1]
            if type(last) is list and last[0] <= key < last[0] + len(last[2]):
                # Still inside the newest splice's items: fold into its payload.
                last[2][key - last[0]] = new
                obj[key] = new
                if to is dict or to is list:
                    _drop_kid(node, key)
                return
        # An element inserted by an earlier splice with no record yet still holds that
        # splice's payload, which is what the replica holds too: a valid anchor.
        _rec_field(t, node, key, old, new)
    obj[key] = new
    if to is dict or to is list:
        _drop_kid(node, key)


def _del_key(t: Tracker, node: _Node, key: str) -> Any:
    obj = node._o
    if key not in obj:
        raise KeyError(key)
    if not _check(node):
        f = node._f
        if f is None:
            f = node._f = {}
        if key not in f:
            t._n += 1
        f[key] = _DEL
        _touch(t, node)
    value = obj.pop(key)
    _drop_kid(node, key)
    return value


def _remap_fields(f: dict[int, Any] | None, i: int, r: int, n: int) -> None:
    """Move per-index records across a splice ``(i, r, n)``: drop the removed, shift the rest."""
    if not f:
        return
    moved = {(j if j < i else j + n - r): rec for j, rec in f.items() if j < i or j >= i + r}
    f.clear()
    f.update(moved)


def _remap_kids(node: _Node, i: int, r: int, n: int) -> None:
    """Keep held proxies of list elements on their current index across a splice."""
    kids = node._kids
    if not kids:
        return
    moved: dict[Any, _Node] = {}
    for j, kid in kids.items():
        if j < i:
            moved[j] = kid
        elif j < i + r:
            kid._dead = True
        else:
            kid._k = j + n - r
            moved[kid._k] = kid
    node._kids = moved


def _splice(t: Tracker, node: _Node, i: int, r: int, items: list[Any]) -> list[Any]:
    """``node._o[i:i+r] = items`` with ``0 <= i <= len``, ``0 <= r <= len - i``; returns the
    removed elements (containers among them are the caller's to keep: never referenced by a
    pending op)."""
    obj = node._o
    size = len(obj)
    n = len(items)
    if r == 0 and n == 0:
        return []
    fresh = _check(node)
    removed: list[Any] = obj[i : i + r]
    had_log = bool(node._log)
    if not fresh:
        if r == size and size > 0:
            # Covers the whole list: one `s` (an `r` at the root) says it best.
            _mark_whole(t, node)
            fresh = True
        else:
            log = node._log
            if log is None:
                log = node._log = []
            last = log[-1] if log else None
            if type(last) is list and i <= last[0] + len(last[2]) and i + r >= last[0]:
                # Touches the newest splice's inserted run: merge into one splice.
                i1, r1, ins = last
                n1 = len(ins)
                start = min(i1, i)
                head = ins[: max(0, i - i1)]
                tail = ins[min(n1, max(0, i + r - i1)) :]
                last[0] = start
                last[1] = (i1 - start) + r1 + max(0, i + r - (i1 + n1))
                last[2] = head + items + tail
                if last[1] == 0 and not last[2]:
                    log.pop()
            else:
                log.append([i, r, list(items)])
                t._n += 1
            if i < size:
                _remap_fields(node._f, i, r, n)
            _touch(t, node)
    if i < size:
        _remap_kids(node, i, r, n)
    obj[i : i + r] = items
    if had_log and not fresh:
        # An earlier pending splice may still reference a removed container as its payload;
        # hand the caller a copy so later edits to it cannot reach that op.
        removed = [_copy(v) for v in removed]
    return removed


def _permute(t: Tracker, node: _Node, perm: list[int]) -> None:
    """Reorder ``node``'s list: ``new[i] = old[perm[i]]`` (one ``m``)."""
    obj = node._o
    n = len(perm)
    if all(perm[i] == i for i in range(n)):
        return
    fresh = _check(node)
    inv = [0] * n
    for new_i, old_i in enumerate(perm):
        inv[old_i] = new_i
    obj[:] = [obj[k] for k in perm]
    kids = node._kids
    if kids:
        moved = {inv[j]: k for j, k in kids.items()}
        for j, k in moved.items():
            k._k = j
        node._kids = moved
    if fresh:
        return
    log = node._log
    if log is None:
        log = node._log = []
    last = log[-1] if log else None
    if type(last) is tuple:
        composed = [last[1][k] for k in perm]
        if all(composed[i] == i for i in range(n)):
            log.pop()
        else:
            log[-1] = ("m", composed)
    else:
        log.append(("m", list(perm)))
        t._n += 1
    f = node._f
    if f:
        node._f = {inv[j]: rec for j, rec in f.items()}
    _touch(t, node)


def _diff(t: Tracker, node: _Node, new: Any) -> None:
    """Assign ``new`` (imported, same kind) over ``node``'s container, in place, recording a
    structural diff: keys -> ``s``/``d``; equal-length lists element-wise; otherwise common
    prefix/suffix -> one splice. Strings under changed keys become string slots."""
    obj = node._o
    if type(obj) is dict:
        for k in RESERVED_SEGMENTS:
            if (k in obj or k in new) and not _json_eq(obj.get(k, _MISSING), new.get(k, _MISSING)):
                # A diff would need a reserved path segment: replace the container instead.
                if not _check(node):
                    _mark_whole(t, node)
                obj.clear()
                obj.update(new)
                if node._kids:
                    for kid in node._kids.values():
                        kid._dead = True
                    node._kids = None
                return
        for k in [k for k in obj if k not in new]:
            _del_key(t, node, k)
        for k, v in new.items():
            old = obj.get(k, _MISSING)
            if old is not _MISSING:
                to = type(old)
                if to is type(v) and (to is dict or to is list):
                    _diff(t, _kid(node, k, old), v)
                    continue
                if _json_eq(old, v):
                    continue
            _set(t, node, k, v)
        return
    size, n = len(obj), len(new)
    if size == n:
        for j in range(n):
            old, v = obj[j], new[j]
            to = type(old)
            if to is type(v) and (to is dict or to is list):
                _diff(t, _kid(node, j, old), v)
            elif not _json_eq(old, v):
                _set(t, node, j, v)
        return
    shortest = min(size, n)
    pre = 0
    while pre < shortest and _json_eq(obj[pre], new[pre]):
        pre += 1
    suf = 0
    while suf < shortest - pre and _json_eq(obj[size - 1 - suf], new[n - 1 - suf]):
        suf += 1
    _splice(t, node, pre, size - pre - suf, new[pre : n - suf])


# -- proxies ---------------------------------------------------------------------------------------


def _key_ok(node: _Node, key: Any) -> None:
    if type(key) is not str:
        raise JSONValueError(
            f"object key {describe(key)} is not a str (at path {describe(_path_of(node))}); "
            f"JSON objects only have string keys",
            path=[*_path_of(node), key],
        )
    if key in RESERVED_SEGMENTS:
        raise UnsafePathError(
            f"unsafe path segment: {key!r} cannot be written as a path (at path "
            f"{describe(_path_of(node))}); JavaScript replicas refuse it. Write the enclosing "
            f"object whole instead (a reserved key inside a written value is fine)",
            segment=key,
        )


def _settle(t: Tracker) -> None:
    if t._n > PENDING_LIMIT:
        # Bounded pending state: a batch this large says little in deltas; one `r` instead.
        t._whole = True
        t._cleanup()


class TrackedDict(_Node, MutableMapping[str, Any]):
    """A tracked JSON object (what ``Tracker.state`` returns for a dict).

    A ``collections.abc.MutableMapping`` (not a ``dict`` subclass): it reads and mutates like
    the plain dict it wraps; every mutator records ops. Nested dicts/lists come back as
    tracked proxies, strings and numbers as themselves. ``copy()`` returns a plain deep copy.
    """

    __slots__ = ()

    _o: dict[str, Any]

    def __getitem__(self, key: str) -> Any:
        v = self._o[key]
        t = type(v)
        if t is dict or t is list:
            return _kid(self, key, v)
        return v

    def get(self, key: str, default: Any = None) -> Any:
        v = self._o.get(key, _MISSING)
        if v is _MISSING:
            return default
        t = type(v)
        if t is dict or t is list:
            return _kid(self, key, v)
        return v

    def __contains__(self, key: object) -> bool:
        return key in self._o

    def __iter__(self) -> Iterator[str]:
        return iter(self._o)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._o)

    def __setitem__(self, key: str, value: Any) -> None:
        if type(key) is not str or key in RESERVED_SEGMENTS:
            _key_ok(self, key)
        tv = type(value)
        if isinstance(value, _Node):
            if value._o is self._o.get(key) and value._p is self:
                return  # `d[k] += ...` on a nested container hands the same container back
            value = _imported(value, self, key)
        elif not (
            value is None
            or tv is bool
            or (tv is str and value.isascii())
            or (tv is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
        ):
            value = _imported(value, self, key)
        t = self._t
        _set(t, self, key, value)
        if t._n > PENDING_LIMIT:
            _settle(t)

    def __delitem__(self, key: str) -> None:
        _key_ok(self, key)
        _del_key(self._t, self, key)
        _settle(self._t)

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        if key not in self._o:
            if default is _MISSING:
                raise KeyError(key)
            return default
        _key_ok(self, key)
        value = _del_key(self._t, self, key)
        _settle(self._t)
        return value

    def popitem(self) -> tuple[str, Any]:
        if not self._o:
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(self._o))
        return key, self.pop(key)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self._o:
            self[key] = default
        return self[key]

    def update(self, other: Any = (), /, **kwargs: Any) -> None:
        # Validate everything first: a bad value anywhere records nothing.
        if isinstance(other, _Node):
            other = other._o
        if hasattr(other, "keys"):
            pairs = [(k, other[k]) for k in other.keys()]  # noqa: SIM118 (dict.update protocol)
        else:
            pairs = [(k, v) for k, v in other]
        pairs.extend(kwargs.items())
        staged = []
        for k, v in pairs:
            _key_ok(self, k)
            staged.append((k, _imported(v, self, k)))
        t = self._t
        for k, v in staged:
            _set(t, self, k, v)
        _settle(t)

    def clear(self) -> None:
        obj = self._o
        if not obj:
            return
        t = self._t
        if not _check(self):
            _mark_whole(t, self)
            self._f = None
        obj.clear()
        if self._kids:
            for kid in self._kids.values():
                kid._dead = True
            self._kids = None
        _settle(t)

    def __ior__(self, other: Any) -> TrackedDict:
        self.update(other)
        return self

    def __or__(self, other: Any) -> dict[str, Any]:
        return {**_copy(self._o), **_copy(_unwrap(other))}

    def __ror__(self, other: Any) -> dict[str, Any]:
        return {**_copy(_unwrap(other)), **_copy(self._o)}


class TrackedList(_Node, MutableSequence[Any]):
    """A tracked JSON array (what ``Tracker.state`` returns for a list).

    A ``collections.abc.MutableSequence`` (not a ``list`` subclass). Mutators become splices
    when called (``append`` -> one ``p``; adjacent inserts merge), ``sort``/``reverse`` one
    ``m``. Slicing returns a plain list whose containers are tracked proxies (a slice of a
    plain list shares its elements, too); ``copy()`` a plain deep copy.
    """

    __slots__ = ()

    _o: list[Any]

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: Any) -> Any:
        obj = self._o
        if type(index) is slice:
            start, _stop, step = index.indices(len(obj))
            return [_wrap(self, start + n * step, v) for n, v in enumerate(obj[index])]
        v = obj[index]
        t = type(v)
        if t is dict or t is list:
            i = operator.index(index)
            return _kid(self, i + len(obj) if i < 0 else i, v)
        return v

    def __iter__(self) -> Iterator[Any]:
        for i, v in enumerate(self._o):
            t = type(v)
            yield _kid(self, i, v) if t is dict or t is list else v

    def __reversed__(self) -> Iterator[Any]:
        obj = self._o
        for i in range(len(obj) - 1, -1, -1):
            yield _wrap(self, i, obj[i])

    def __contains__(self, value: object) -> bool:
        return _unwrap(value) in self._o

    def index(self, value: Any, start: SupportsIndex = 0, stop: SupportsIndex = 2**63 - 1) -> int:
        return self._o.index(_unwrap(value), start, stop)

    def count(self, value: Any) -> int:
        return self._o.count(_unwrap(value))

    def __lt__(self, other: Any) -> bool:
        return bool(self._o < _unwrap(other))

    def __le__(self, other: Any) -> bool:
        return bool(self._o <= _unwrap(other))

    def __gt__(self, other: Any) -> bool:
        return bool(self._o > _unwrap(other))

    def __ge__(self, other: Any) -> bool:
        return bool(self._o >= _unwrap(other))

    def _items(self, values: Iterable[Any], at: int) -> list[Any]:
        if isinstance(values, _Node):
            values = values._o
        return [_imported(v, self, at + n) for n, v in enumerate(list(values))]

    def _index_error(self, index: Any, verb: str) -> NoReturn:
        path = _path_of(self)
        raise _IndexPathError(
            f"list index {describe(index)} out of range for {verb} at path {describe(path)} "
            f"(length {len(self._o)}); use append/insert/extend to grow a list (no holes)",
            path=[*path, index],
        )

    @overload
    def __setitem__(self, index: SupportsIndex, value: Any) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Any]) -> None: ...

    def __setitem__(self, index: Any, value: Any) -> None:
        obj = self._o
        t = self._t
        if type(index) is slice:
            start, stop, step = index.indices(len(obj))
            if step == 1:
                stop = max(stop, start)
                items = self._items(value, start)
                _splice(t, self, start, stop - start, items)
            else:
                targets = range(start, stop, step)
                items = self._items(value, 0)
                if len(items) != len(targets):
                    raise ValueError(
                        f"attempt to assign sequence of size {len(items)} to extended slice "
                        f"of size {len(targets)}"
                    )
                for j, v in zip(targets, items, strict=True):
                    _set(t, self, j, v)
            _settle(t)
            return
        if type(index) is not int:
            try:
                index = operator.index(index)
            except TypeError:
                raise TypeError(
                    f"list indices must be integers or slices, not {type(index).__name__}"
                ) from None
        i = index + len(obj) if index < 0 else index
        if not 0 <= i < len(obj):
            self._index_error(index, "assignment")
        if isinstance(value, _Node) and value._o is obj[i] and value._p is self:
            return  # `l[i] += ...` on a nested container hands the same container back
        _set(t, self, i, _imported(value, self, i))
        _settle(t)

    def __delitem__(self, index: Any) -> None:
        obj = self._o
        t = self._t
        if type(index) is slice:
            start, stop, step = index.indices(len(obj))
            if step == 1:
                if stop > start:
                    _splice(t, self, start, stop - start, [])
            else:
                for j in sorted(range(start, stop, step), reverse=True):
                    _splice(t, self, j, 1, [])
            _settle(t)
            return
        i = operator.index(index)
        if i < 0:
            i += len(obj)
        if not 0 <= i < len(obj):
            raise IndexError("list assignment index out of range")
        _splice(t, self, i, 1, [])
        _settle(t)

    def insert(self, index: SupportsIndex, value: Any) -> None:
        size = len(self._o)
        i = operator.index(index)
        if i < 0:
            i = max(0, size + i)
        i = min(i, size)
        items = self._items([value], i)
        _splice(self._t, self, i, 0, items)
        _settle(self._t)

    def append(self, value: Any) -> None:
        size = len(self._o)
        v = _imported(value, self, size)
        _splice(self._t, self, size, 0, [v])
        _settle(self._t)

    def extend(self, values: Iterable[Any]) -> None:
        size = len(self._o)
        items = self._items(values, size)
        _splice(self._t, self, size, 0, items)
        _settle(self._t)

    def pop(self, index: SupportsIndex = -1) -> Any:
        obj = self._o
        if not obj:
            raise IndexError("pop from empty list")
        i = operator.index(index)
        if i < 0:
            i += len(obj)
        if not 0 <= i < len(obj):
            raise IndexError("pop index out of range")
        removed = _splice(self._t, self, i, 1, [])
        _settle(self._t)
        return removed[0]

    def remove(self, value: Any) -> None:
        i = self._o.index(_unwrap(value))
        _splice(self._t, self, i, 1, [])
        _settle(self._t)

    def clear(self) -> None:
        if self._o:
            _splice(self._t, self, 0, len(self._o), [])
            _settle(self._t)

    def reverse(self) -> None:
        n = len(self._o)
        _permute(self._t, self, list(range(n - 1, -1, -1)))
        _settle(self._t)

    def sort(self, *, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> None:
        """Sort in place (stable, like ``list.sort``); recorded as one ``m`` permutation.

        ``key`` receives the elements as ``state`` would return them (proxies for
        containers)."""
        obj = self._o
        keys = obj if key is None else [key(_wrap(self, i, v)) for i, v in enumerate(obj)]
        perm = sorted(range(len(obj)), key=keys.__getitem__, reverse=reverse)
        _permute(self._t, self, perm)
        _settle(self._t)

    def __iadd__(self, values: Iterable[Any]) -> TrackedList:  # type: ignore[misc]
        self.extend(values)
        return self

    def __imul__(self, n: SupportsIndex) -> TrackedList:
        count = operator.index(n)
        if count <= 0:
            self.clear()
        elif count > 1 and self._o:
            # Copies, not references: a container sits in the tracked value exactly once.
            self.extend(_copy(self._o) * (count - 1))
        return self

    def __add__(self, other: Any) -> list[Any]:
        return [*self, *_unwrap(other)]

    def __radd__(self, other: Any) -> list[Any]:
        return [*_unwrap(other), *self]

    def __mul__(self, n: SupportsIndex) -> list[Any]:
        return list(self) * operator.index(n)

    __rmul__ = __mul__


# -- the tracker -----------------------------------------------------------------------------------


class Tracker:
    """Records Chord ops for mutations of one JSON value; see :func:`track`.

    Not thread-safe: one producer mutates and flushes (as with a plain dict).
    """

    __slots__ = ("_flushed", "_import", "_n", "_root", "_scan", "_target", "_touched", "_whole")

    def __init__(
        self, value: Any, max_overlap_scan: int = 65536, max_depth: int = MAX_DEPTH
    ) -> None:
        if type(max_overlap_scan) is not int or max_overlap_scan < 0:
            raise ChordError(
                f"max_overlap_scan must be a non-negative int (UTF-16 units), got "
                f"{describe(max_overlap_scan)}"
            )
        if type(max_depth) is not int or not 1 <= max_depth <= MAX_DEPTH:
            raise ChordError(
                f"max_depth must be an int in 1..{MAX_DEPTH} (MAX_DEPTH), got {describe(max_depth)}"
            )
        self._scan = max_overlap_scan
        # The validating copy for this tracker's depth bound: a host that embeds this value in
        # a larger one (a lane view holds tool outputs three levels down) passes a smaller bound.
        self._import = _importer(max_depth)
        self._touched: list[_Node] = []
        self._n = 0
        self._whole = True  # the first flush is a base batch: a consumer starts with nothing
        self._flushed = False
        self._target: Any = None
        self._root: _Node | None = None
        self._replace(_imported(value, None, tracker=self))

    def __repr__(self) -> str:
        return f"<Tracker dirty={self.dirty} target={describe(self._target)}>"

    def _replace(self, value: Any) -> None:
        if self._root is not None:
            self._root._dead = True
        self._target = value
        t = type(value)
        if t is dict:
            self._root = TrackedDict(self, value, None, None)
        elif t is list:
            self._root = TrackedList(self, value, None, None)
        else:
            self._root = None

    def _cleanup(self) -> None:
        for n in self._touched:
            n._touched = False
            n._f = None
            n._log = None
            n._dk = None
        self._touched = []
        self._n = 0

    @property
    def state(self) -> Any:
        """The tracked value to read and mutate: a :class:`TrackedDict` / :class:`TrackedList`
        (or the scalar itself). Assigning replaces the whole value: the next flush is
        ``[["r", value]]``."""
        root = self._root
        return self._target if root is None else root

    @state.setter
    def state(self, value: Any) -> None:
        root = self._root
        if root is not None and value is root:
            return  # `t.state += [...]` / `t.state |= {...}`: mutated in place already
        new = _imported(value, None, tracker=self)
        self._replace(new)
        self._whole = True
        self._cleanup()

    @property
    def target(self) -> Any:
        """The plain current value (mutating it directly bypasses tracking: don't)."""
        return self._target

    @property
    def dirty(self) -> bool:
        """Whether anything is pending (may be True for changes that cancel out)."""
        return self._whole or bool(self._touched)

    def rebase(self) -> None:
        """Make the next flush ``[["r", value]]`` without changing the value."""
        self._whole = True
        self._cleanup()

    def discard(self) -> None:
        """Accept pending changes without emitting them (the consumers are assumed to hold
        the current value). The first flush of a tracker stays a base batch."""
        self._cleanup()
        self._whole = not self._flushed

    def flush(self) -> list[Op]:
        """The ops since the last flush (a list, possibly empty); clears pending state.

        The first flush, and the first after ``rebase()`` / ``state = ...``, is
        ``[["r", value]]``. Payloads are fresh copies: nothing emitted shares a container
        with the tracked value."""
        if self._whole:
            ops: list[Op] = [["r", _copy(self._target)]]
            self._whole = False
            self._flushed = True
            self._cleanup()
            return ops
        self._flushed = True
        ops = []
        root = self._root
        if root is not None and root._touched:
            _emit(self, root, [], ops)
        self._cleanup()
        return ops


def _emit(t: Tracker, node: _Node, path: list[Any], ops: list[Op]) -> None:
    obj = node._o
    log = node._log
    if log:
        for e in log:
            if type(e) is list:
                ops.append(["p", list(path), e[0], e[1], [_copy(v) for v in e[2]]])
            else:
                ops.append(["m", list(path), list(e[1])])
    f = node._f
    if f:
        for key, rec in f.items():
            at = [*path, key]
            if rec is _SET:
                ops.append(["s", at, _copy(obj[key])])
            elif rec is _DEL:
                ops.append(["d", at])
            else:
                cur = obj[key]
                if type(cur) is str:
                    string_ops(ops, at, rec, cur, t._scan)
                else:  # only if the target was mutated directly
                    ops.append(["s", at, _copy(cur)])
    dk = node._dk
    if dk:
        is_dict = type(obj) is dict
        for kid in dk.values():
            if kid._dead:
                continue
            k = kid._k
            if is_dict:
                if obj.get(k, _MISSING) is not kid._o:
                    continue
            elif k >= len(obj) or obj[k] is not kid._o:
                continue
            if f is not None and f.get(k) is _SET:
                continue
            if log and not is_dict and _inserted(node, k):
                continue
            _emit(t, kid, [*path, k], ops)


def track(value: Any, *, max_overlap_scan: int = 65536, max_depth: int = MAX_DEPTH) -> Tracker:
    """Start tracking a private copy of the JSON value ``value``.

    ``tracker.state`` reads and mutates it like plain dicts/lists/strings and records ops;
    ``tracker.flush()`` returns them (the first flush is a base batch). ``max_overlap_scan``
    bounds, in UTF-16 units, how much of a string's old tail the rolling-window probe looks at.
    ``max_depth`` bounds the value's container nesting (at most :data:`MAX_DEPTH`); a write
    that would exceed it raises :class:`JSONValueError` and changes nothing.
    """
    return Tracker(value, max_overlap_scan, max_depth)
