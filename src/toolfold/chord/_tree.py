"""The tracker's state tree: nodes, path bookkeeping and the pending records they hold.

A node (the base of both proxy kinds) stands for one container of the tracked value and
keeps that container's pending records; paths are never stored, only computed by walking
parent links (``_path_of``) when a message or a flush needs them. See ``_tracker.py`` for
the overall design and ``_mutate.py`` for the primitives that write through these nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, Protocol, cast

from ._errors import PathError, UnsafePathError
from ._ops import (
    MAX_SAFE_INTEGER,
    RESERVED_SEGMENTS,
    NotJSON,
    describe,
    json_copier,
    raise_not_json,
)
from ._values import _copy

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
    value: Any, node: _Node | None, key: Any = None, tracker: TreeOwner | None = None
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
    owner = cast("TreeOwner", tracker) if node is None else node._t
    try:
        return owner._import(value, 0 if node is None else _depth_of(node) + 1)
    except NotJSON as exc:
        base = [] if node is None else [*_path_of(node), key]
        raise_not_json(exc, base, "cannot write to the tracked value")


def _unwrap(value: Any) -> Any:
    return value._o if isinstance(value, _Node) else value


class TreeOwner(Protocol):
    """What the nodes and the mutation primitives need of the tracker that owns them
    (``_tracker.Tracker`` is the one implementation). A protocol instead of an import keeps
    the chord files depending in one direction: tracker → proxies → mutate → tree."""

    _n: int
    _touched: list[_Node]
    _whole: bool
    _root: _Node | None
    _import: Callable[[Any, int], Any]

    def _cleanup(self) -> None: ...


# -- nodes -----------------------------------------------------------------------------------------


class _Node:
    """State shared by both proxy kinds; see the module docstring."""

    __slots__ = ("_dead", "_dk", "_f", "_k", "_kids", "_log", "_o", "_p", "_t", "_touched")

    _o: Any

    def __init__(self, tracker: TreeOwner, obj: Any, parent: _Node | None, key: Any) -> None:
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


# The proxy classes (_proxies.py) are built on the mutation primitives, which are built on
# these nodes; they register here so that _kid can create them without an import cycle.
_DICT_PROXY: type[_Node] = _Node
_LIST_PROXY: type[_Node] = _Node


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


def _touch(t: TreeOwner, node: _Node) -> None:
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
    k = (_DICT_PROXY if type(child) is dict else _LIST_PROXY)(node._t, child, node, key)
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


def _mark_whole(t: TreeOwner, node: _Node) -> None:
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


def _rec_field(t: TreeOwner, node: _Node, key: Any, old: Any, new: Any) -> None:
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


def _settle(t: TreeOwner) -> None:
    if t._n > PENDING_LIMIT:
        # Bounded pending state: a batch this large says little in deltas; one `r` instead.
        t._whole = True
        t._cleanup()
