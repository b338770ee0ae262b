"""The tracker's mutation primitives: every recorded write goes through these.

``_set``, ``_del_key``, ``_splice`` and ``_permute`` change one container and record what the
replica needs (or nothing, when the container is fresh); ``_diff`` turns an assignment of a
whole container over an existing one into a structural diff made of those primitives.
"""

from __future__ import annotations

from typing import Any

from ._ops import RESERVED_SEGMENTS
from ._tree import (
    _DEL,
    _MISSING,
    TreeOwner,
    _check,
    _drop_kid,
    _inserted,
    _kid,
    _mark_whole,
    _Node,
    _rec_field,
    _touch,
)
from ._values import _copy, _json_eq, _same_scalar


def _set(t: TreeOwner, node: _Node, key: Any, new: Any) -> None:
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


def _del_key(t: TreeOwner, node: _Node, key: str) -> Any:
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


def _splice(t: TreeOwner, node: _Node, i: int, r: int, items: list[Any]) -> list[Any]:
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


def _permute(t: TreeOwner, node: _Node, perm: list[int]) -> None:
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


def _diff(t: TreeOwner, node: _Node, new: Any) -> None:
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
