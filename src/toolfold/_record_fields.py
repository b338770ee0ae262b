"""The fields of a ``toolfold._record.record`` class, and the descriptors that stand for
dataclass's ``__dataclass_fields__``, ``__dataclass_params__`` and generated ``__doc__``
until something reads them.

A record keeps its fields as ``Field`` objects of this module (the attributes of
``dataclasses.Field``, with ``kind`` for its private ``_field_type``). The class's
``__dataclass_fields__`` is a ``LazyFields`` holding them: the first read (``dataclasses.fields``,
``asdict``, ``replace``, ``is_dataclass``, orjson, pydantic) imports ``dataclasses``,
builds the real ``dataclasses.Field`` objects (the same object for a field a subclass
inherits, as dataclass shares it) and puts the dict in the descriptor's place on the
class. ``LazyParams`` and ``LazyDoc`` do the same for ``__dataclass_params__`` and for
the docstring dataclass writes for a class without one (``Name(signature)``, from
``inspect``). Imports nothing else from toolfold, and neither ``dataclasses`` nor
``inspect`` until one of those is read.
"""

from __future__ import annotations

import sys
from typing import Any

FIELDS = "__dataclass_fields__"
PARAMS = "__dataclass_params__"


class _Missing:
    """No default (dataclass's ``MISSING``; that one is turned into this and back)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FieldKind:
    """A field's kind (dataclass's ``_FIELD``, ``_FIELD_CLASSVAR``)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


FIELD = FieldKind("_FIELD")
CLASSVAR = FieldKind("_FIELD_CLASSVAR")


class Field:
    """``dataclasses.Field`` for a record: what ``field()`` returns and what a record
    keeps per field; ``real`` is the ``dataclasses.Field`` once one was built or given."""

    __slots__ = (
        "compare",
        "default",
        "default_factory",
        "hash",
        "init",
        "kind",
        "kw_only",
        "metadata",
        "name",
        "real",
        "repr",
        "type",
    )

    def __init__(
        self,
        default: Any,
        default_factory: Any,
        init: bool,
        repr: bool,
        hash: bool | None,
        compare: bool,
        metadata: Any,
        kw_only: Any,
        real: Any = None,
    ) -> None:
        self.name: str = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.init = init
        self.repr = repr
        self.hash = hash
        self.compare = compare
        self.metadata = metadata
        self.kw_only = kw_only
        self.kind = FIELD
        self.real = real

    def __set_name__(self, owner: type, name: str) -> None:
        # As dataclasses.Field: a descriptor default learns its name.
        set_name = getattr(type(self.default), "__set_name__", None)
        if set_name:
            set_name(self.default, owner, name)

    def __repr__(self) -> str:
        return (
            f"Field(name={self.name!r},type={self.type!r},default={self.default!r},"
            f"default_factory={self.default_factory!r},init={self.init!r},"
            f"repr={self.repr!r},hash={self.hash!r},compare={self.compare!r},"
            f"metadata={self.metadata!r},kw_only={self.kw_only!r},_field_type={self.kind})"
        )

    @classmethod
    def of_unprocessed(cls, f: Any, dataclasses: Any) -> Field:
        """A ``dataclasses.field(...)`` written in a record's body."""
        return cls(
            _ours(f.default, dataclasses),
            _ours(f.default_factory, dataclasses),
            f.init,
            f.repr,
            f.hash,
            f.compare,
            f.metadata,
            _ours(f.kw_only, dataclasses),
            real=f,
        )

    @classmethod
    def of(cls, f: Any, dataclasses: Any) -> Field | None:
        """A field of a dataclass (or of a record whose fields were built); None for an
        ``InitVar``, which records leave to dataclass."""
        if f._field_type is dataclasses._FIELD:
            kind = FIELD
        elif f._field_type is dataclasses._FIELD_CLASSVAR:
            kind = CLASSVAR
        else:
            return None
        ours = cls.of_unprocessed(f, dataclasses)
        ours.name, ours.type, ours.kind = f.name, f.type, kind
        return ours

    def unprocessed(self, dataclasses: Any) -> Any:
        """The ``dataclasses.field(...)`` this was written as."""
        if self.real is not None:
            return self.real
        return dataclasses.field(
            default=_theirs(self.default, dataclasses),
            default_factory=_theirs(self.default_factory, dataclasses),
            init=self.init,
            repr=self.repr,
            hash=self.hash,
            compare=self.compare,
            metadata=self.metadata,
            kw_only=_theirs(self.kw_only, dataclasses),
        )


def _ours(value: Any, dataclasses: Any) -> Any:
    return MISSING if value is dataclasses.MISSING else value


def _theirs(value: Any, dataclasses: Any) -> Any:
    return dataclasses.MISSING if value is MISSING else value


def field(
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
    metadata: Any = None,
    kw_only: Any = MISSING,
) -> Any:
    """``dataclasses.field`` for a record, without importing ``dataclasses``."""
    if default is not MISSING and default_factory is not MISSING:
        raise ValueError("cannot specify both default and default_factory")
    return Field(default, default_factory, init, repr, hash, compare, metadata, kw_only)


def real_field(f: Field, dataclasses: Any) -> Any:
    """The ``dataclasses.Field`` for ``f``, built once and shared by every class that
    has ``f`` (a subclass has its base's), as dataclass shares its own."""
    real = f.real
    if real is None:
        real = f.real = f.unprocessed(dataclasses)
    real.name = f.name
    real.type = f.type
    real._field_type = dataclasses._FIELD if f.kind is FIELD else dataclasses._FIELD_CLASSVAR
    real.kw_only = _theirs(f.kw_only, dataclasses)
    return real


def is_a_field(value: Any) -> bool:
    """Is ``value`` a ``field(...)``, this module's or dataclass's?"""
    if isinstance(value, Field):
        return True
    dataclasses = sys.modules.get("dataclasses")  # none of its Fields without it
    return dataclasses is not None and isinstance(value, dataclasses.Field)


class LazyFields:
    """A record's ``__dataclass_fields__`` until it is read: its ``Field`` objects; on
    the first read, the dict of ``dataclasses.Field`` dataclass would have put there,
    which then replaces this on ``owner`` (the class, once it is made)."""

    __slots__ = ("fields", "owner")

    def __init__(self, fields: dict[str, Field]) -> None:
        self.fields = fields
        self.owner: Any = None

    def __get__(self, instance: Any, owner: Any = None) -> dict[str, Any]:
        import dataclasses

        real = {name: real_field(f, dataclasses) for name, f in self.fields.items()}
        if self.owner is not None:
            setattr(self.owner, FIELDS, real)
        return real


class LazyParams:
    """A record's ``__dataclass_params__`` until it is read: the options as written."""

    __slots__ = ("home", "options")

    def __init__(self, options: dict[str, Any], home: LazyFields) -> None:
        self.options = options
        self.home = home

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        import dataclasses

        made: Any = dataclasses.__dict__["_DataclassParams"]
        params = made(**{name: self.options[name] for name in made.__slots__})
        if self.home.owner is not None:
            setattr(self.home.owner, PARAMS, params)
        return params


class LazyDoc:
    """The docstring dataclass writes for a class without one, ``Name(signature)``,
    made (with ``inspect``) when it is first read."""

    __slots__ = ("home",)

    def __init__(self, home: LazyFields) -> None:
        self.home = home

    def __get__(self, instance: Any, owner: Any = None) -> str:
        import inspect

        cls = self.home.owner
        try:
            signature = str(inspect.signature(cls)).replace(" -> None", "")
        except (TypeError, ValueError):
            signature = ""
        doc: str = cls.__name__ + signature
        cls.__doc__ = doc
        return doc


def class_attr(cls: type, name: str) -> Any:
    """``getattr(cls, name, None)`` without running a descriptor."""
    for klass in cls.__mro__:
        found = klass.__dict__.get(name)
        if found is not None:
            return found
    return None


def record_fields(cls: type) -> dict[str, Field] | None:
    """The fields of a record class (also of a plain subclass of one) whose
    ``__dataclass_fields__`` nothing has read yet; None otherwise."""
    entry = class_attr(cls, FIELDS)
    return entry.fields if type(entry) is LazyFields else None


def fields_of(cls: type) -> list[Any]:
    """``dataclasses.fields(cls)`` (ours while nothing has read the real ones)."""
    fields = record_fields(cls)
    if fields is not None:
        return [f for f in fields.values() if f.kind is FIELD]
    import dataclasses

    return list(dataclasses.fields(cls))


def inherited(cls: type) -> tuple[dict[str, Field], bool, bool] | None:
    """The fields ``cls`` inherits from record and dataclass bases, whether one of them
    is frozen and whether there is one (the start of dataclass's ``_process_class``);
    None when a base has an ``InitVar``."""
    fields: dict[str, Field] = {}
    any_frozen_base = False
    has_dataclass_bases = False
    for base in cls.__mro__[-1:0:-1]:
        entry = class_attr(base, FIELDS)
        if entry is None:
            continue
        has_dataclass_bases = True
        if type(entry) is LazyFields:
            fields.update(entry.fields)
        else:
            import dataclasses

            for f in entry.values():
                ours = Field.of(f, dataclasses)
                if ours is None:
                    return None
                fields[ours.name] = ours
        params = class_attr(base, PARAMS)
        if params.options["frozen"] if type(params) is LazyParams else params.frozen:
            any_frozen_base = True
    return fields, any_frozen_base, has_dataclass_bases
