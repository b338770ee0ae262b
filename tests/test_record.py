"""toolfold._record.record declares the same class @dataclass does: for generated class
specs (fields with defaults, factories, init/repr/compare/hash/kw_only flags, a ClassVar,
a base class, __post_init__, the decorator's options), a record and a dataclass agree on
the __init__ signature, construction and its errors, eq, hash, repr, frozenness, the
docstring, replace, fields, asdict, __match_args__ and pattern matching."""

from __future__ import annotations

import copy
import dataclasses
import inspect
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold._record import field, record, replace

# What a class spec is made of. "ClassVar[int]" is found in this module's namespace, as
# dataclass finds it, so this module imports ClassVar.
_ = ClassVar
FIELD = st.fixed_dictionaries(
    {
        "default": st.sampled_from(["none", "value", "factory"]),
        "init": st.booleans(),
        "compare": st.booleans(),
        "repr": st.booleans(),
        "hash": st.sampled_from([None, True, False]),
        "kw_only": st.sampled_from([None, True, False]),
        "plain": st.booleans(),  # a bare default, not field(default=...)
    }
)
CLASS = st.fixed_dictionaries(
    {
        "fields": st.lists(FIELD, max_size=4),
        "classvar": st.booleans(),
        "post_init": st.booleans(),
        "doc": st.booleans(),
    }
)
OPTIONS = st.fixed_dictionaries(
    {
        "frozen": st.booleans(),
        "eq": st.booleans(),
        "repr": st.booleans(),
        "slots": st.booleans(),
        "kw_only": st.booleans(),
        "match_args": st.booleans(),
    }
)
VALUE = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none())


def _namespace(
    field_of: Any, spec: dict[str, Any], prefix: str, calls: list[str]
) -> dict[str, Any]:
    """A class body for ``spec``: fields ``{prefix}0...`` (those with a default last, as
    most classes order them), ``field_of`` being dataclasses.field or record's field."""
    ordered = sorted(spec["fields"], key=lambda f: f["default"] != "none")
    annotations: dict[str, Any] = {}
    body: dict[str, Any] = {"__annotations__": annotations, "__qualname__": "Rec"}
    if spec["doc"]:
        body["__doc__"] = "A record."
    for i, f in enumerate(ordered):
        name = f"{prefix}{i}"
        annotations[name] = "object"
        if f["default"] == "value" and f["plain"]:
            body[name] = i
            continue
        kwargs: dict[str, Any] = {"compare": f["compare"], "repr": f["repr"], "hash": f["hash"]}
        kwargs["init"] = f["init"] or f["default"] == "none"  # init=False needs a default
        if f["kw_only"] is not None:
            kwargs["kw_only"] = f["kw_only"]
        if f["default"] == "value":
            kwargs["default"] = i
        elif f["default"] == "factory":
            kwargs["default_factory"] = tuple
        body[name] = field_of(**kwargs)
    if spec["classvar"]:
        annotations[f"{prefix}_shared"] = "ClassVar[int]"
        body[f"{prefix}_shared"] = 5
    if spec["post_init"]:
        body["__post_init__"] = lambda self: calls.append(type(self).__qualname__)
    return body


def _declare(
    decorator: Any,
    field_of: Any,
    base: dict[str, Any] | None,
    spec: dict[str, Any],
    options: dict[str, Any],
    calls: list[str],
) -> Any:
    bases: tuple[type, ...] = ()
    if base is not None:
        parent = type("Base", (), _namespace(field_of, base, "b", calls))
        bases = (decorator(frozen=options["frozen"], slots=options["slots"])(parent),)
    return decorator(**options)(type("Rec", bases, _namespace(field_of, spec, "f", calls)))


def _outcome(call: Any) -> tuple[Any, ...]:
    """("ok", result) or ("raised", exception type, message)."""
    try:
        return ("ok", call())
    except Exception as exc:
        return ("raised", type(exc), str(exc))


def _same(a: Any, b: Any) -> Any:
    """Call a and b: equal results or the same exception and message; a's outcome."""
    left, right = _outcome(a), _outcome(b)
    assert left == right
    return left


@settings(max_examples=300, deadline=None)
@given(
    spec=CLASS,
    base=st.none() | CLASS,
    options=OPTIONS,
    values=st.lists(VALUE, min_size=16, max_size=16),
)
def test_a_record_is_the_dataclass_it_declares(
    spec: dict[str, Any],
    base: dict[str, Any] | None,
    options: dict[str, Any],
    values: list[Any],
) -> None:
    mine_calls: list[str] = []
    their_calls: list[str] = []
    declared = _same(
        lambda: _declare(record, field, base, spec, options, mine_calls) and None,
        lambda: (
            _declare(dataclasses.dataclass, dataclasses.field, base, spec, options, []) and None
        ),
    )
    if declared[0] == "raised":  # e.g. a field without a default after one with one
        return
    mine = _declare(record, field, base, spec, options, mine_calls)
    theirs = _declare(dataclasses.dataclass, dataclasses.field, base, spec, options, their_calls)
    mine_calls.clear()

    assert str(inspect.signature(mine)) == str(inspect.signature(theirs))
    assert mine.__doc__ == theirs.__doc__
    assert getattr(mine, "__match_args__", None) == getattr(theirs, "__match_args__", None)
    assert repr(mine.__dataclass_params__) == repr(theirs.__dataclass_params__)
    assert (mine.__hash__ is None) == (theirs.__hash__ is None)

    parameters = list(inspect.signature(theirs).parameters.values())
    positional = [p.name for p in parameters if p.kind is p.POSITIONAL_OR_KEYWORD]
    keyword = [p.name for p in parameters if p.kind is p.KEYWORD_ONLY]
    first = dict(zip(positional + keyword, values, strict=False))
    second = dict(zip(positional + keyword, values[8:], strict=False))
    # Construction: by keyword, positionally, and the errors of a wrong call.
    a, b = mine(**first), mine(**second)
    x, y = theirs(**first), theirs(**second)
    assert len(mine_calls) == len(their_calls)
    args = [first[n] for n in positional]
    kwargs = {n: first[n] for n in keyword}
    for call_args, call_kwargs in [
        (args, kwargs),
        ([*args, 1], kwargs),  # one too many
        (args[:-1], kwargs),  # one fewer: a default, or missing
        ([], {**first, "unknown": 1}),
        (args[:1], first),  # a positional one given twice
    ]:
        _same(
            lambda a=call_args, k=call_kwargs: dataclasses.asdict(mine(*a, **k)),
            lambda a=call_args, k=call_kwargs: dataclasses.asdict(theirs(*a, **k)),
        )

    assert [repr(f) for f in dataclasses.fields(mine)] == [
        repr(f) for f in dataclasses.fields(theirs)
    ]
    assert (a == b) == (x == y)
    assert (a == mine(**first)) == (x == theirs(**first))
    assert a.__eq__(x) is NotImplemented and x.__eq__(a) is NotImplemented  # another class
    _same(lambda: hash(a) == hash(b), lambda: hash(x) == hash(y))
    if options["eq"] and options["frozen"]:
        assert hash(a) == hash(x)  # the same fields hashed, the same way
    if options["repr"] or base is not None:  # a base's __repr__ is inherited
        assert repr(a) == repr(x)
    else:
        assert repr(a).startswith("<") and repr(x).startswith("<")
    assert dataclasses.asdict(a) == dataclasses.asdict(x)
    # Not a field of a frozen slotted class: dataclass's __setattr__ names the class
    # before slots made a new one (TypeError from super()); see the test below.
    others = [] if options["frozen"] and options["slots"] else ["f_shared", "not_a_field"]
    for name in [p.name for p in parameters][:1] + others:
        _same(lambda n=name: setattr(a, n, 1), lambda n=name: setattr(x, n, 1))
        _same(lambda n=name: delattr(b, n), lambda n=name: delattr(y, n))
    for name in [*list(first)[:1], "f_shared"]:
        # copy.replace (Python 3.13) calls the __replace__ dataclass adds there.
        for change in (replace, dataclasses.replace, getattr(copy, "replace", replace)):
            _same(
                lambda c=change, n=name: dataclasses.asdict(c(a, **{n: "r"})),
                lambda n=name: dataclasses.asdict(dataclasses.replace(x, **{n: "r"})),
            )
    if positional and getattr(theirs, "__match_args__", ()):
        match a:
            case mine(value):
                assert value == getattr(a, theirs.__match_args__[0])
            case _:
                pytest.fail("no match")


def test_record_reads_a_bodys_dataclasses_field_and_its_fields_are_dataclasses() -> None:
    """A record takes ``dataclasses.field`` too; dataclasses' functions take records,
    its Field objects shared with a subclass as dataclass shares them."""

    @record(frozen=True, slots=True)
    class Base:
        x: int = dataclasses.field(default=1, metadata={"unit": "s"})
        y: tuple[int, ...] = field(default_factory=tuple, repr=False)

    @record(frozen=True, slots=True)
    class Sub(Base):
        z: str = "z"

    assert Sub(2).x == 2 and Base().y == () and repr(Sub()).endswith("Sub(x=1, z='z')")
    assert dataclasses.is_dataclass(Sub) and dataclasses.is_dataclass(Sub())
    base_x, sub_x = dataclasses.fields(Base)[0], dataclasses.fields(Sub)[0]
    assert base_x is sub_x and base_x.metadata["unit"] == "s"
    assert dataclasses.astuple(Sub(3)) == (3, (), "z")
    assert replace(Sub(), z="w") == Sub(z="w")


def test_a_dataclass_over_a_record_and_a_record_over_a_dataclass() -> None:
    @record(frozen=True)
    class Base:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Middle(Base):
        y: int = 0

    @record(frozen=True, kw_only=True)
    class Top(Middle):
        z: int = 1

    assert str(inspect.signature(Top)) == "(x: 'int', y: 'int' = 0, *, z: 'int' = 1) -> None"
    assert repr(Top(1, z=3)).endswith("Top(x=1, y=0, z=3)")
    assert [f.name for f in dataclasses.fields(Top)] == ["x", "y", "z"]
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        record(type("Thawed", (Top,), {"__annotations__": {"w": "int"}}))


def test_a_frozen_slotted_record_refuses_any_attribute() -> None:
    """Where a record differs from dataclass (Python 3.11): dataclass's frozen
    ``__setattr__`` compares with the class it had before ``slots=True`` made a new one,
    so an attribute that is not a field gets a TypeError from ``super()``; a record's
    names the class it returns and raises FrozenInstanceError, as for a field."""

    @record(frozen=True, slots=True)
    class Frozen:
        x: int

    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'y'"):
        Frozen(1).y = 2  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'x'"):
        del Frozen(1).x

    class Sub(Frozen):
        __slots__ = ("note",)

    sub = Sub(1)
    sub.note = "a subclass's own slot"  # as dataclass: only fields are frozen in a subclass
    assert sub.note == "a subclass's own slot"
    with pytest.raises(dataclasses.FrozenInstanceError):
        sub.x = 2  # type: ignore[misc]


def test_positional_patterns_and_signature() -> None:
    @record(frozen=True)
    class Point:
        x: int
        y: int = 0

    @dataclasses.dataclass(frozen=True)
    class Plain:
        x: int
        y: int = 0

    assert str(inspect.signature(Point)) == str(inspect.signature(Plain))
    match Point(1, 2):
        case Point(x, y):
            assert (x, y) == (1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Point(1).x = 2  # type: ignore[misc]
    assert {Point(1), Point(1, 0)} == {Point(1)}
    assert Point(1) != Plain(1)


def test_repr_is_recursion_safe_and_names_the_qualname() -> None:
    @record
    class Node:
        children: list[Any]

    node = Node([])
    node.children.append(node)
    assert (
        repr(node)
        == "test_repr_is_recursion_safe_and_names_the_qualname.<locals>.Node(children=[...])"
    )
    with pytest.raises(TypeError, match="unhashable"):
        hash(node)


def test_methods_the_class_writes_itself_are_kept() -> None:
    @record(frozen=True)
    class Own:
        x: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

        def __hash__(self) -> int:
            return 7

    assert repr(Own(1)) == "own" and Own(1) == 3 and hash(Own(2)) == 7


def test_what_records_do_not_use_goes_to_dataclass_unchanged() -> None:
    @record(order=True, frozen=True)
    class Ordered:
        x: int = field(default=0)

    assert Ordered(1) < Ordered(2) and Ordered() == Ordered(0)
    assert (
        repr(Ordered(1))
        == "test_what_records_do_not_use_goes_to_dataclass_unchanged.<locals>.Ordered(x=1)"
    )

    @record
    class WithInitVar:
        x: int
        scale: dataclasses.InitVar[int] = 1

        def __post_init__(self, scale: int) -> None:
            self.x *= scale

    assert WithInitVar(2, 3).x == 6 and [f.name for f in dataclasses.fields(WithInitVar)] == ["x"]


def test_a_subclass_first_compared_uses_the_records_methods() -> None:
    @record(frozen=True)
    class Base:
        x: int

    class Sub(Base):
        pass

    assert Sub(1) == Sub(1) and Sub(1) != Base(1) and hash(Sub(1)) == hash(Base(1))
    assert repr(Sub(2)).endswith("Sub(x=2)") and Base(3) == Base(3)


def test_errors_are_dataclasses() -> None:
    def declare(body: dict[str, Any], **options: Any) -> Any:
        return record(**options)(type("Bad", (), body))

    with pytest.raises(ValueError, match="mutable default <class 'list'> for field x"):
        declare({"__annotations__": {"x": "list[int]"}, "x": []})
    with pytest.raises(TypeError, match="'y' is a field but has no type annotation"):
        declare({"__annotations__": {}, "y": field(default=1)})
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        declare({"__annotations__": {"a": "int", "b": "int"}, "a": 1})
    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__ in class Bad"):
        declare({"__annotations__": {}, "__setattr__": lambda *_: None}, frozen=True)
    with pytest.raises(TypeError, match="Bad already specifies __slots__"):
        declare({"__annotations__": {"a": "int"}, "__slots__": ("a",)}, slots=True)
    with pytest.raises(ValueError, match="cannot specify both default and default_factory"):
        field(default=1, default_factory=list)
    with pytest.raises(TypeError, match="field c cannot have a default factory"):
        declare({"__annotations__": {"c": "ClassVar[int]"}, "c": field(default_factory=int)})
