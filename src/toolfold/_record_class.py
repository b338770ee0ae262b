"""How ``toolfold._record.record`` makes a class: dataclass's ``_process_class`` for
the options records use, without importing ``dataclasses`` (see ``toolfold._record``)."""

from __future__ import annotations

import abc
import re
import sys
import types
from _thread import get_ident
from typing import Any

from toolfold._record_fields import (
    CLASSVAR,
    FIELD,
    MISSING,
    Field,
    LazyDoc,
    LazyFields,
    LazyParams,
    fields_of,
    inherited,
    is_a_field,
    record_fields,
)


class _HasDefaultFactory:
    """The default of a ``default_factory`` parameter (dataclass's
    ``_HAS_DEFAULT_FACTORY``): ``<factory>`` in a signature."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_HAS_DEFAULT_FACTORY = _HasDefaultFactory()
_OPTIONS = {
    "init": True,
    "repr": True,
    "eq": True,
    "order": False,
    "unsafe_hash": False,
    "frozen": False,
    "match_args": True,
    "kw_only": False,
    "slots": False,
    "weakref_slot": False,
}
_TO_DATACLASS = ("order", "unsafe_hash", "weakref_slot")
_MODULE_IDENTIFIER_RE = re.compile(r"^(?:\s*(\w+)\s*\.)?\s*(\w+)")


def record(cls: Any = None, /, **options: Any) -> Any:
    """``@record`` / ``@record(frozen=True, ...)``: see the module's docstring."""
    if cls is None:
        return lambda cls: _record(cls, options)
    return _record(cls, options)


def replace(obj: Any, /, **changes: Any) -> Any:
    """``dataclasses.replace``: a new ``obj`` with ``changes``; for a record without
    importing ``dataclasses``, for anything else ``dataclasses.replace`` itself."""
    fields = record_fields(type(obj))
    if fields is None:
        import dataclasses

        return dataclasses.replace(obj, **changes)
    for f in fields.values():
        if f.kind is CLASSVAR:
            continue
        if not f.init:
            if f.name in changes:
                raise ValueError(
                    f"field {f.name} is declared with init=False, it cannot be "
                    "specified with replace()"
                )
            continue
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)


def _replace_method(self: Any, /, **changes: Any) -> Any:
    """``__replace__`` (``copy.replace``, Python 3.13): ``replace``."""
    return replace(self, **changes)


_replace_method.__name__ = "__replace__"


def _to_dataclass(cls: Any, options: dict[str, Any]) -> Any:
    """What records do not use: ``dataclasses.dataclass`` itself, after turning
    this module's ``field`` objects in the class body into dataclass's."""
    import dataclasses

    for name, value in list(cls.__dict__.items()):
        if type(value) is Field:
            setattr(cls, name, value.unprocessed(dataclasses))
    return dataclasses.dataclass(cls, **options)


def _record(cls: Any, options: dict[str, Any]) -> Any:
    if not options.keys() <= _OPTIONS.keys() or any(options.get(k) for k in _TO_DATACLASS):
        return _to_dataclass(cls, options)
    body = cls.__dict__
    if "__annotations__" not in body and "__annotate__" in body:
        return _to_dataclass(cls, options)  # lazily evaluated annotations
    found = inherited(cls)
    if found is None:
        return _to_dataclass(cls, options)
    fields, any_frozen_base, has_dataclass_bases = found
    annotations = body.get("__annotations__", {})
    own = _own_fields(cls, annotations, options.get("kw_only", False))
    if own is None:
        return _to_dataclass(cls, options)
    frozen = options.get("frozen", False)
    for f in own:
        fields[f.name] = f
        if is_a_field(getattr(cls, f.name, None)):
            if f.default is MISSING:
                delattr(cls, f.name)
            else:
                setattr(cls, f.name, f.default)
    for name, value in body.items():
        if is_a_field(value) and name not in annotations:
            raise TypeError(f"{name!r} is a field but has no type annotation")
    if has_dataclass_bases:
        if any_frozen_base and not frozen:
            raise TypeError("cannot inherit non-frozen dataclass from a frozen one")
        if not any_frozen_base and frozen:
            raise TypeError("cannot inherit frozen dataclass from a non-frozen one")
    return _declare(cls, fields, {**_OPTIONS, **options})


def _own_fields(cls: Any, annotations: dict[str, Any], kw_only: bool) -> list[Field] | None:
    """The fields ``cls``'s own annotations declare (dataclass's ``_get_field``), or None
    when one is an ``InitVar`` or ``KW_ONLY`` (those go to ``dataclasses``)."""
    module = sys.modules.get(cls.__module__)
    typing = sys.modules.get("typing")
    dataclasses = sys.modules.get("dataclasses")  # no InitVar or KW_ONLY without it
    own: list[Field] = []
    for name, annotation in annotations.items():
        # A string annotation names what dataclass finds (without ``eval``) in the
        # class's module, or in ``typing``/``dataclasses`` for ``typing.X``.
        named, qualifier = (
            _named(annotation, module) if isinstance(annotation, str) else (None, None)
        )
        if dataclasses is not None and (
            _is_initvar_or_kw_only(annotation, dataclasses)
            or (qualifier in (None, dataclasses) and _is_initvar_or_kw_only(named, dataclasses))
        ):
            return None
        default = getattr(cls, name, MISSING)
        if isinstance(default, Field):
            f = default
        elif dataclasses is not None and isinstance(default, dataclasses.Field):
            f = Field.of_unprocessed(default, dataclasses)
        else:
            if isinstance(default, types.MemberDescriptorType):
                default = MISSING  # a slot of a base: no default
            f = Field(default, MISSING, True, True, None, True, None, MISSING)
        f.name = name
        f.type = annotation
        f.kind = FIELD
        if typing is not None and (
            _is_classvar(annotation, typing)
            or (qualifier in (None, typing) and _is_classvar(named, typing))
        ):
            f.kind = CLASSVAR
            if f.default_factory is not MISSING:
                raise TypeError(f"field {name} cannot have a default factory")
            if f.kw_only is not MISSING:
                raise TypeError(f"field {name} is a ClassVar but specifies kw_only")
        else:
            if f.kw_only is MISSING:
                f.kw_only = kw_only
            if f.default.__class__.__hash__ is None:
                raise ValueError(
                    f"mutable default {type(f.default)} for field {name} is not allowed: "
                    "use default_factory"
                )
        own.append(f)
    return own


def _named(annotation: str, module: Any) -> tuple[Any, Any]:
    """What dataclass's ``_is_type`` finds for a string annotation: the object its first
    name (``X`` or ``mod.X``) names, and ``mod``'s module (None without ``mod.``)."""
    match = _MODULE_IDENTIFIER_RE.match(annotation)
    if match is None or module is None:
        return None, None
    module_name, name = match.groups()
    if not module_name:
        return module.__dict__.get(name), None
    qualifier = module.__dict__.get(module_name)
    if not isinstance(qualifier, types.ModuleType):
        return None, None
    return qualifier.__dict__.get(name), qualifier


def _is_classvar(annotation: Any, typing: Any) -> bool:
    return annotation is typing.ClassVar or (
        type(annotation) is typing._GenericAlias and annotation.__origin__ is typing.ClassVar
    )


def _is_initvar_or_kw_only(annotation: Any, dataclasses: Any) -> bool:
    return (
        annotation is dataclasses.KW_ONLY
        or annotation is dataclasses.InitVar
        or type(annotation) is dataclasses.InitVar
    )


def _declare(cls: Any, fields: dict[str, Field], options: dict[str, Any]) -> Any:
    """What ``_process_class`` does once the fields are known: the methods, the
    descriptors, the slots."""
    body = cls.__dict__
    frozen, eq, slots = options["frozen"], options["eq"], options["slots"]
    module = sys.modules.get(cls.__module__)
    globals = module.__dict__ if module is not None else {}
    lazy_fields = LazyFields(fields)
    added: dict[str, Any] = {
        "__dataclass_params__": LazyParams(options, lazy_fields),
        "__dataclass_fields__": lazy_fields,
    }
    class_hash = body.get("__hash__", MISSING)
    has_explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in body))
    field_list = [f for f in fields.values() if f.kind is FIELD]
    std = [f for f in field_list if f.init and not f.kw_only]
    kw_only = [f for f in field_list if f.init and f.kw_only]
    if options["init"]:
        init = _init_fn(
            field_list,
            std,
            kw_only,
            frozen,
            hasattr(cls, "__post_init__"),
            "__dataclass_self__" if "self" in fields else "self",
            globals,
            slots,
            "__init__" in body,
        )
        if init is not None:
            added["__init__"] = init
    if options["repr"] and "__repr__" not in body:
        added["__repr__"] = _lazy(lazy_fields, "__repr__")
    if eq and "__eq__" not in body:
        added["__eq__"] = _lazy(lazy_fields, "__eq__")
    if frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in body:
                raise TypeError(f"Cannot overwrite attribute {name} in class {cls.__name__}")
        names = frozenset(f.name for f in field_list)
        added["__setattr__"], added["__delattr__"] = _frozen_methods(lazy_fields, names)
    if eq and not has_explicit_hash:
        # dataclass's table for eq=True, unsafe_hash=False: frozen -> the hash of
        # the fields hashed (``hash=None``: the compared ones); else unhashable.
        added["__hash__"] = _lazy(lazy_fields, "__hash__") if frozen else None
    if not cls.__doc__:
        added["__doc__"] = LazyDoc(lazy_fields)
    if options["match_args"] and "__match_args__" not in body:
        added["__match_args__"] = tuple(f.name for f in std)
    qualname = cls.__qualname__
    for value in added.values():
        if isinstance(value, types.FunctionType):
            value.__qualname__ = f"{qualname}.{value.__name__}"
    if sys.version_info >= (3, 13) and "__replace__" not in body:
        added["__replace__"] = _replace_method  # copy.replace(), as dataclass's
    if slots:
        cls = _with_slots(cls, added, field_list, frozen)
    else:
        for name, value in added.items():
            setattr(cls, name, value)
    lazy_fields.owner = cls
    abc.update_abstractmethods(cls)
    return cls


def _with_slots(cls: Any, added: dict[str, Any], field_list: list[Field], frozen: bool) -> Any:
    """dataclass's ``_add_slots``: the class again, with ``__slots__`` for its fields."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} already specifies __slots__")
    cls_dict = dict(cls.__dict__)
    cls_dict.update(added)
    field_names = tuple(f.name for f in field_list)
    inherited_slots = {slot for base in cls.__mro__[1:-1] for slot in _slots_of(base)}
    cls_dict["__slots__"] = tuple(n for n in field_names if n not in inherited_slots)
    for name in field_names:
        cls_dict.pop(name, None)
    cls_dict.pop("__dict__", None)
    cls_dict.pop("__weakref__", None)
    qualname = getattr(cls, "__qualname__", None)
    cls = type(cls)(cls.__name__, cls.__bases__, cls_dict)
    if qualname is not None:
        cls.__qualname__ = qualname
    if frozen:
        if "__getstate__" not in cls_dict:
            cls.__getstate__ = _getstate
        if "__setstate__" not in cls_dict:
            cls.__setstate__ = _setstate
    return cls


def _slots_of(cls: Any) -> tuple[str, ...]:
    slots = cls.__dict__.get("__slots__")
    if slots is None:
        return ()
    if isinstance(slots, str):
        return (slots,)
    if hasattr(slots, "__next__"):
        raise TypeError(f"Slots of '{cls.__name__}' cannot be determined")
    return tuple(slots)


def _getstate(self: Any) -> list[Any]:
    """Pickling a frozen slotted record (dataclass's ``_dataclass_getstate``)."""
    return [getattr(self, f.name) for f in fields_of(type(self))]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(fields_of(type(self)), state, strict=False):
        object.__setattr__(self, f.name, value)


_getstate.__name__ = _getstate.__qualname__ = "_dataclass_getstate"
_setstate.__name__ = _setstate.__qualname__ = "_dataclass_setstate"


def _init_fn(
    fields: list[Field],
    std_fields: list[Field],
    kw_only_fields: list[Field],
    frozen: bool,
    has_post_init: bool,
    self_name: str,
    globals: dict[str, Any],
    slots: bool,
    own_init: bool,
) -> Any:
    """dataclass's ``_init_fn``: the same checks, the same source, compiled the same
    way (None for a class that writes its own ``__init__``)."""
    seen_default: Field | None = None
    for f in std_fields:
        if not (f.default is MISSING and f.default_factory is MISSING):
            seen_default = f
        elif seen_default is not None:
            after = f" {seen_default.name!r}" if sys.version_info >= (3, 13) else ""
            raise TypeError(f"non-default argument {f.name!r} follows default argument{after}")
    if own_init:
        return None
    locals = {f"_type_{f.name}": f.type for f in fields}
    locals["_HAS_DEFAULT_FACTORY"] = _HAS_DEFAULT_FACTORY
    locals["__dataclass_builtins_object__"] = object
    body_lines = []
    for f in fields:
        line = _field_init(f, frozen, locals, self_name, slots)
        if line:
            body_lines.append(line)
    if has_post_init:
        body_lines.append(f"{self_name}.__post_init__()")
    if not body_lines:
        body_lines = ["pass"]
    params = [_init_param(f) for f in std_fields]
    if kw_only_fields:
        params += ["*", *(_init_param(f) for f in kw_only_fields)]
    locals["_return_type"] = None
    args = ",".join([self_name, *params])
    text = "\n".join(f"  {line}" for line in body_lines)
    source = (
        f"def __create_fn__({', '.join(locals)}):\n"
        f" def __init__({args})->_return_type:\n{text}\n return __init__"
    )
    namespace: dict[str, Any] = {}
    exec(_compiled(source), globals, namespace)
    return namespace["__create_fn__"](**locals)


def _field_init(
    f: Field, frozen: bool, locals: dict[str, Any], self_name: str, slots: bool
) -> str | None:
    default_name = f"_dflt_{f.name}"
    if f.default_factory is not MISSING:
        locals[default_name] = f.default_factory
        if f.init:
            value = f"{default_name}() if {f.name} is _HAS_DEFAULT_FACTORY else {f.name}"
        else:
            value = f"{default_name}()"
    elif f.init:
        if f.default is not MISSING:
            locals[default_name] = f.default
        value = f.name
    elif slots and f.default is not MISSING:
        locals[default_name] = f.default
        value = default_name
    else:
        return None  # the class attribute holds the default
    if frozen:
        return f"__dataclass_builtins_object__.__setattr__({self_name},{f.name!r},{value})"
    return f"{self_name}.{f.name}={value}"


def _init_param(f: Field) -> str:
    if f.default is MISSING and f.default_factory is MISSING:
        default = ""
    elif f.default is not MISSING:
        default = f"=_dflt_{f.name}"
    else:
        default = "=_HAS_DEFAULT_FACTORY"
    return f"{f.name}:_type_{f.name}{default}"


def _frozen_methods(home: LazyFields, names: frozenset[str]) -> tuple[Any, Any]:
    """dataclass's frozen ``__setattr__``/``__delattr__`` as two closures: the same
    conditions, errors and ``super`` calls, without compiling them."""

    def __setattr__(self: Any, name: str, value: Any) -> None:
        cls = home.owner
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        cls = home.owner
        if type(self) is cls or name in names:
            raise _frozen_error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _frozen_error(message: str) -> Exception:
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(message)


def _lazy(home: LazyFields, name: str) -> Any:
    """A stand-in for the class's ``name`` that, on its first call, compiles the
    method dataclass would have generated, puts it on the class in its place and
    calls it: a class whose records are never compared, hashed or printed never
    compiles them, and after the first call they cost what dataclass's do."""

    def first_call(self: Any, *args: Any) -> Any:
        cls = home.owner
        method = _compile(cls, name)
        method.__name__ = name
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)
        return method(self, *args)

    first_call.__name__ = name
    return first_call


def _compile(cls: Any, name: str) -> Any:
    """The method ``name`` as dataclass (Python 3.11) generates it for ``cls``."""
    fields = fields_of(cls)
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
    exec(_compiled(source), {}, namespace)
    return namespace[name]


def _compiled(source: str) -> Any:
    """``source`` compiled as dataclass's ``exec`` compiles it: without this module's
    ``from __future__ import annotations`` (the annotations are the field types)."""
    return compile(source, "<string>", "exec", dont_inherit=True)


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
            shown: str = method(self)
        finally:
            running.discard(key)
        return shown

    return __repr__
