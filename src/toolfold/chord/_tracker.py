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

Where things are: this module holds ``Tracker`` and the flush walk (``_emit``);
``_proxies.py`` the proxy classes; ``_mutate.py`` the recording primitives and the
structural diff; ``_tree.py`` the nodes, path bookkeeping and pending records;
``_values.py`` plain JSON copy and equality; ``_strdiff.py`` the ops of a string slot.
"""

from __future__ import annotations

from typing import Any

from ._errors import ChordError
from ._ops import MAX_DEPTH, Op, describe
from ._proxies import TrackedDict, TrackedList
from ._strdiff import string_ops
from ._tree import _DEL, _MISSING, _SET, _imported, _importer, _inserted, _Node
from ._values import _copy

__all__ = ["TrackedDict", "TrackedList", "Tracker", "track"]


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
