"""The tracker's proxies: ``TrackedDict`` and ``TrackedList``, what ``Tracker.state`` hands out.

They read like the plain containers they wrap and turn every mutator into calls of the
mutation primitives (``_mutate.py``); each proxy is also the node of its container.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Iterator, MutableMapping, MutableSequence
from typing import Any, NoReturn, SupportsIndex, overload

from . import _tree
from ._errors import JSONValueError, PathError, UnsafePathError
from ._mutate import _del_key, _permute, _set, _splice
from ._ops import MAX_SAFE_INTEGER, RESERVED_SEGMENTS, describe
from ._tree import (
    _MISSING,
    PENDING_LIMIT,
    _check,
    _imported,
    _kid,
    _mark_whole,
    _Node,
    _path_of,
    _settle,
    _unwrap,
    _wrap,
)
from ._values import _copy

__all__ = ["TrackedDict", "TrackedList"]


class _IndexPathError(PathError, IndexError):
    """A list index that would leave a hole (a ``PathError`` and an ``IndexError``)."""


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


_tree._DICT_PROXY = TrackedDict
_tree._LIST_PROXY = TrackedList
