"""The applier: folds a batch of decoded ops into a plain value, atomically."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from ._errors import ChordError, JSONValueError, PathError, ShapeError, UnsafePathError
from ._ops import ALLOWED_VALUES, JSON, Path, check_op, copy_json, describe, lone_surrogate
from ._text import drop_utf16_prefix

__all__ = ["apply"]

# Undo-log entry kinds. Atomicity is an undo log, not a copy: each op records just enough to
# reverse itself, so a batch costs what it changes, and a failure mid-batch restores the
# touched containers in reverse order.
_SET = 0  # (kind, container, key, old)       container[key] = old
_UNSET = 1  # (kind, dict, key, None)         del dict[key]
_POP = 2  # (kind, list, None, None)          list.pop()
_INSERT = 3  # (kind, list, index, old)       list.insert(index, old)
_SPLICE = 4  # (kind, list, (i, n), removed)  list[i:i+n] = removed
_RESTORE = 5  # (kind, list, None, old)       list[:] = old

_MISSING: Any = object()
_Undo = list[tuple[int, Any, Any, Any]]


def _path_text(path: Path) -> str:
    return describe(path)


def _unresolvable(path: Path, where: str, why: str) -> NoReturn:
    raise PathError(f"unresolvable path: {_path_text(path)} at {where}: {why}", path=path)


def _no_members(parent: Any, path: Path, depth: int, where: str) -> NoReturn:
    if parent is None and depth == 0:
        why = "no value yet (start with an r op)"
    else:
        why = f"the {type(parent).__name__} at {_path_text(path[:depth])} has no members"
    _unresolvable(path[: depth + 1], where, why)


def _resolve(root: Any, path: Path, end: int, where: str) -> Any:
    """The container at ``path[:end]``, walking own members only (dict keys, list indices)."""
    cur = root
    for depth in range(end):
        seg = path[depth]
        t = type(cur)
        if t is dict:
            # An int segment on an object addresses the key of its decimal text, as `obj[0]`
            # does in a JavaScript replica of the same stream.
            key = seg if type(seg) is str else str(seg)
            try:
                cur = cur[key]
            except KeyError:
                _unresolvable(path[: depth + 1], where, f"no key {key!r}")
        elif t is list:
            if type(seg) is not int:
                _unresolvable(path[: depth + 1], where, f"key {seg!r} on a list (needs an index)")
            if seg >= len(cur):
                _unresolvable(
                    path[: depth + 1], where, f"index {seg} past the end of a list of {len(cur)}"
                )
            cur = cur[seg]
        else:
            _no_members(cur, path, depth, where)
    return cur


def _list_index(parent: list[Any], seg: Any, path: Path, where: str, verb: str, end: bool) -> int:
    """Validate the last segment of a path into a list: an index < len (<= len when ``end``)."""
    if type(seg) is not int:
        _unresolvable(path, where, f"key {seg!r} on a list (needs an index)")
    limit = len(parent) if end else len(parent) - 1
    if seg > limit:
        # Out-of-range index: refused as an unsafe segment (it could make a sparse array or a
        # huge allocation in a JavaScript replica), as the reference does.
        allowed = f"0..{len(parent)}" if end else f"0..{len(parent) - 1}"
        raise UnsafePathError(
            f"unsafe path segment: {seg} in path {_path_text(path)} at {where}: {verb} on a list "
            f"of {len(parent)} accepts indices {allowed}",
            segment=seg,
        )
    return seg


def _string_at(parent: Any, path: Path, where: str, verb: str) -> tuple[Any, str]:
    key = path[-1]
    t = type(parent)
    k: str | int
    if t is dict:
        k = key if type(key) is str else str(key)
        cur = parent.get(k, _MISSING)
        if cur is _MISSING:
            _unresolvable(path, where, f"{verb} needs an existing string, there is no key {k!r}")
    elif t is list:
        k = _list_index(parent, key, path, where, verb, end=False)
        cur = parent[k]
    else:
        _no_members(parent, path, len(path) - 1, where)
    if type(cur) is not str:
        _unresolvable(path, where, f"{verb} needs a string, found {type(cur).__name__}")
    return k, cur


def _apply_one(
    root: Any, op: list[Any], undo: _Undo | None, where: str, then_append: str | None = None
) -> Any:
    """Apply one validated op; ``then_append`` fuses a following ``a`` into a ``t``."""
    verb = op[0]
    if verb == "r":
        return copy_json(op[1], [], "r value")
    path: Path = op[1]
    if verb == "p" or verb == "m":
        lst = _resolve(root, path, len(path), where)
        if type(lst) is not list:
            _unresolvable(path, where, f"{verb} needs a list, found {type(lst).__name__}")
        if verb == "p":
            n = len(lst)
            i = min(op[2], n)  # JavaScript splice clamps index and count
            j = i + min(op[3], n - i)
            raw_items = op[4]
            # The items list stands where the list at `path` stands: len(path) containers
            # enclose it, and they count towards MAX_DEPTH (a replica's depth stays bounded
            # whatever sequence of batches arrives).
            items = copy_json(
                list(raw_items) if type(raw_items) is tuple else raw_items,
                path,
                "p items",
                len(path),
            )
            if undo is not None:
                undo.append((_SPLICE, lst, (i, len(items)), lst[i:j]))
            lst[i:j] = items
        else:
            perm: list[int] = op[2]
            if len(perm) != len(lst):
                raise ShapeError(
                    f"m permutation has {len(perm)} entries but the list at "
                    f"{_path_text(path)} has {len(lst)} at {where}; send a base batch instead"
                )
            old = lst[:]
            if undo is not None:
                undo.append((_RESTORE, lst, None, old))
            lst[:] = [old[k] for k in perm]
        return root
    parent = _resolve(root, path, len(path) - 1, where)
    key = path[-1]
    if verb == "s":
        value = copy_json(op[2], path, "s value", len(path))
        if type(parent) is dict:
            k = key if type(key) is str else str(key)
            old = parent.get(k, _MISSING)
            if undo is not None:
                undo.append(
                    (_UNSET, parent, k, None) if old is _MISSING else (_SET, parent, k, old)
                )
            parent[k] = value
        elif type(parent) is list:
            idx = _list_index(parent, key, path, where, verb, end=True)
            if idx == len(parent):
                parent.append(value)
                if undo is not None:
                    undo.append((_POP, parent, None, None))
            else:
                if undo is not None:
                    undo.append((_SET, parent, idx, parent[idx]))
                parent[idx] = value
        else:
            _no_members(parent, path, len(path) - 1, where)
    elif verb == "d":
        if type(parent) is dict:
            k = key if type(key) is str else str(key)
            old = parent.pop(k, _MISSING)  # a missing key is a no-op, by the spec
            if old is not _MISSING and undo is not None:
                undo.append((_SET, parent, k, old))
        elif type(parent) is list:
            idx = _list_index(parent, key, path, where, verb, end=False)
            old = parent.pop(idx)
            if undo is not None:
                undo.append((_INSERT, parent, idx, old))
        else:
            _no_members(parent, path, len(path) - 1, where)
    else:  # "a" / "t": strings are immutable, so the change is a set of the parent's slot
        k, text = _string_at(parent, path, where, verb)
        appended = op[2] if verb == "a" else then_append
        if appended is not None:
            bad = lone_surrogate(appended)
            if bad is not None:
                raise JSONValueError(
                    f"a text at path {_path_text(path)} at {where}: holds a lone surrogate at "
                    f"index {bad}; {ALLOWED_VALUES}",
                    path=path,
                )
        if verb == "a":
            new = text + op[2]
        else:
            new = drop_utf16_prefix(text, op[2])
            if then_append is not None:
                # The rolling window's t + a: appending to the fresh, unshared slice lets
                # CPython grow it in place instead of copying the whole window a second time.
                new += then_append
        if undo is not None:
            undo.append((_SET, parent, k, text))
        parent[k] = new
    return root


def _rollback(undo: _Undo) -> None:
    for kind, container, key, old in reversed(undo):
        if kind == _SET:
            container[key] = old
        elif kind == _UNSET:
            del container[key]
        elif kind == _POP:
            container.pop()
        elif kind == _INSERT:
            container.insert(key, old)
        elif kind == _SPLICE:
            i, n = key
            container[i : i + n] = old
        else:
            container[:] = old


def apply(target: JSON, ops: Iterable[Any]) -> JSON:
    """Apply the decoded ops of one batch to ``target`` and return the resulting value.

    ``target`` is mutated in place (its containers are reused) and the result is returned;
    always use the return value, since ``r`` replaces the root. ``target`` may be ``None``
    when the batch starts with ``r``.

    Atomic: if any op fails, every change the batch made is reverted and ``target`` is left
    equal to what it was (a deleted-then-restored object key may move to the end of its
    object: key order is not a replication invariant). Payloads are copied, so the ops and the
    result never share containers. Only :class:`ChordError` subclasses escape.
    """
    if type(ops) is not list and type(ops) is not tuple:
        if isinstance(ops, str | bytes | dict) or not isinstance(ops, Iterable):
            raise ShapeError(f"a batch must be a list of ops, got {describe(ops)}")
        ops = list(ops)
    undo: _Undo = []
    log: _Undo | None = undo
    root = target
    try:
        # The whole batch is validated before anything is touched (like decode-then-apply).
        batch = [check_op(raw, f"op {i}") for i, raw in enumerate(ops)]
        i, n = 0, len(batch)
        while i < n:
            op = batch[i]
            verb = op[0]
            if verb == "t" and i + 1 < n:
                nxt = batch[i + 1]
                if nxt[0] == "a" and nxt[1] == op[1]:
                    root = _apply_one(root, op, log, f"op {i}", nxt[2])
                    i += 2
                    continue
            root = _apply_one(root, op, log, f"op {i}")
            if verb == "r":
                # Everything after an r touches only the fresh copy, which a failure discards
                # whole; only the changes made before it to `target` need undoing.
                log = None
            i += 1
    except ChordError:
        _rollback(undo)
        raise
    except RecursionError:
        _rollback(undo)
        raise ShapeError("a path or payload is nested too deeply to apply") from None
    except Exception as exc:  # defensive: a bug here must still not leak a foreign error
        _rollback(undo)
        raise ChordError(f"could not apply the batch: {type(exc).__name__}: {exc}") from exc
    except BaseException:  # KeyboardInterrupt and friends: still leave the target intact
        _rollback(undo)
        raise
    return root
