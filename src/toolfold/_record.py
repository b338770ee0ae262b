"""``record``: ``@dataclass`` that costs less to define.

``@record(frozen=True)`` is ``@dataclass(frozen=True)`` with the same semantics (the
``__init__`` signature and defaults, ``__eq__`` over the ``compare=True`` fields of the
same class only (``NotImplemented`` otherwise), ``__hash__`` (frozen and eq: the hash of
those fields; eq and not frozen: unhashable), ``__repr__`` (``QualName(field=value,
...)`` over the ``repr=True`` fields, recursion-safe), ``FrozenInstanceError``,
``__match_args__``, ``dataclasses.fields/replace/asdict``), but at definition
``dataclasses`` compiles only ``__init__``. ``__eq__``, ``__hash__`` and ``__repr__``
start as stand-ins that, on a class's first comparison, hash or repr, compile the very
method dataclass generates and put it in their place: a record never compared, hashed
or printed never pays for them, and after the first call they cost what dataclass's
do. A frozen record's ``__setattr__``/``__delattr__`` are closures with the generated
methods' conditions and errors (on Python 3.11 and 3.12, whose ``dataclasses`` makes
them in one replaceable function, ``_frozen_get_del_attr``; elsewhere dataclass's own).

Why: CPython's ``dataclasses`` compiles every generated method from source with its
own ``exec`` (Python 3.11: ~390 us to define a frozen five-field class, ~240 us without
the generated ``__eq__``/``__hash__``/``__repr__``, ~140 us without the frozen
``__setattr__``/``__delattr__`` either; ~210 us vs ~110 us unfrozen), and ``toolfold
run -- true`` defines a few dozen records before it runs anything (docs/BENCHMARKS.md,
"fifth round"). Construction is the generated ``__init__`` itself.

For type checkers ``record`` *is* ``dataclasses.dataclass`` (the ``TYPE_CHECKING``
import below), so mypy sees every record as a dataclass. ``order=True`` and
``unsafe_hash=True`` go to ``dataclass`` unchanged; ``eq=False`` and ``repr=False`` add
no method, as with dataclass. ``__dataclass_params__`` reports the options as written. Imports nothing else from toolfold.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

__all__ = ["record"]

if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:
    import sys
    from _thread import get_ident

    def record(cls: Any = None, /, **options: Any) -> Any:
        """``@record`` / ``@record(frozen=True, ...)``: see the module's docstring."""
        if cls is None:
            return lambda cls: _record(cls, options)
        return _record(cls, options)

    def _record(cls: Any, options: dict[str, Any]) -> Any:
        eq = options.pop("eq", True)
        want_repr = options.pop("repr", True)
        if options.get("order") or options.get("unsafe_hash"):
            return dataclasses.dataclass(cls, eq=eq, repr=want_repr, **options)
        body = cls.__dict__
        # What dataclass would leave alone: methods the class body defines itself.
        own_eq = "__eq__" in body
        own_hash = "__hash__" in body and not (body["__hash__"] is None and own_eq)
        cls = _dataclass(cls, options)
        params = cls.__dataclass_params__
        params.eq = eq
        params.repr = want_repr
        qualname = cls.__qualname__
        if want_repr and "__repr__" not in body:
            _set(cls, qualname, "__repr__", _lazy(cls, "__repr__"))
        if eq:
            if not own_eq:
                _set(cls, qualname, "__eq__", _lazy(cls, "__eq__"))
            if not own_hash:
                # dataclass's table for eq=True, unsafe_hash=False: frozen -> the hash of
                # the fields hashed (``hash=None``: the compared ones); else unhashable.
                if params.frozen:
                    _set(cls, qualname, "__hash__", _lazy(cls, "__hash__"))
                else:
                    cls.__hash__ = None
        return cls

    def _frozen_methods(cls: Any, fields: Any, globals: Any) -> tuple[Any, Any]:
        """``dataclasses._frozen_get_del_attr`` (Python 3.11, 3.12) as two closures: the
        same conditions, errors and ``super`` calls, without compiling them."""
        names = tuple(f.name for f in fields)

        def __setattr__(self: Any, name: str, value: Any) -> None:
            if type(self) is cls or name in names:
                raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
            super(cls, self).__setattr__(name, value)

        def __delattr__(self: Any, name: str) -> None:
            if type(self) is cls or name in names:
                raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
            super(cls, self).__delattr__(name)

        return __setattr__, __delattr__

    _GENERATED_FROZEN = getattr(dataclasses, "_frozen_get_del_attr", None)
    _PATCH_FROZEN = (
        (3, 11) <= sys.version_info[:2] <= (3, 12)
        and _GENERATED_FROZEN is not None
        and _GENERATED_FROZEN.__code__.co_varnames[:3] == ("cls", "fields", "globals")
    )

    def _dataclass(cls: Any, options: dict[str, Any]) -> Any:
        """``dataclass(cls, eq=False, repr=False, **options)``; frozen, on the Python
        versions whose ``dataclasses`` make ``__setattr__``/``__delattr__`` in
        ``_frozen_get_del_attr``, with closures instead of two ``exec`` (~0.12 ms a
        class). Another thread defining a frozen dataclass meanwhile gets the same
        closures: the same methods."""
        if not (_PATCH_FROZEN and options.get("frozen")):
            return dataclasses.dataclass(cls, eq=False, repr=False, **options)
        dataclasses._frozen_get_del_attr = _frozen_methods
        try:
            return dataclasses.dataclass(cls, eq=False, repr=False, **options)
        finally:
            dataclasses._frozen_get_del_attr = _GENERATED_FROZEN

    def _set(cls: Any, qualname: str, name: str, fn: Any) -> None:
        fn.__name__ = name
        fn.__qualname__ = f"{qualname}.{name}"
        setattr(cls, name, fn)

    def _lazy(cls: Any, name: str) -> Any:
        """A stand-in for ``cls``'s ``name`` that, on its first call, compiles the method
        dataclass would have generated, puts it on ``cls`` in its place and calls it: a
        class whose records are never compared, hashed or printed never compiles them,
        and after the first call they cost what dataclass's do."""

        def first_call(self: Any, *args: Any) -> Any:
            method = _compile(cls, name)
            _set(cls, cls.__qualname__, name, method)
            return method(self, *args)

        return first_call

    def _compile(cls: Any, name: str) -> Any:
        """The method ``name`` as dataclass (Python 3.11) generates it for ``cls``."""
        fields = dataclasses.fields(cls)
        if name == "__repr__":
            shown = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
            body = f'return self.__class__.__qualname__ + f"({shown})"'
            return _recursion_safe(_exec(name, "self", body))
        if name == "__eq__":
            names = [f.name for f in fields if f.compare]
            mine = "".join(f"self.{n}," for n in names)
            theirs = "".join(f"other.{n}," for n in names)
            body = (
                "if other.__class__ is self.__class__:\n"
                f"  return ({mine})==({theirs})\n"
                "return NotImplemented"
            )
            return _exec(name, "self, other", body)
        hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
        return _exec(name, "self", f"return hash(({''.join(f'self.{n},' for n in hashed)}))")

    def _exec(name: str, args: str, body: str) -> Any:
        source = f"def {name}({args}):\n" + "".join(f" {line}\n" for line in body.split("\n"))
        namespace: dict[str, Any] = {}
        exec(source, {}, namespace)
        return namespace[name]

    def _recursion_safe(method: Any) -> Any:
        """``method`` returning ``...`` for an object whose repr is already being made
        on this thread (as dataclass's ``_recursive_repr``)."""
        running: set[tuple[int, int]] = set()

        def __repr__(self: Any) -> str:
            key = (id(self), get_ident())
            if key in running:
                return "..."
            running.add(key)
            try:
                return method(self)
            finally:
                running.discard(key)

        return __repr__
