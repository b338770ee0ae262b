"""toolfold._record.record declares the same class @dataclass does: for generated field
sets and options, a record and a dataclass agree on construction, eq, hash, repr,
frozenness, replace, fields, asdict and pattern matching."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold._record import record

FIELD = st.fixed_dictionaries(
    {
        "default": st.booleans(),
        "compare": st.booleans(),
        "repr": st.booleans(),
        "hash": st.sampled_from([None, True, False]),
    }
)
VALUE = st.one_of(st.integers(-3, 3), st.text(max_size=3), st.none())


def _declare(decorator: Any, specs: list[dict[str, Any]], options: dict[str, Any]) -> Any:
    # Fields with a default last, as a dataclass needs them.
    ordered = sorted(specs, key=lambda spec: spec["default"])
    namespace: dict[str, Any] = {"__annotations__": {}, "__qualname__": "Rec"}
    for i, spec in enumerate(ordered):
        name = f"f{i}"
        namespace["__annotations__"][name] = "object"
        kwargs = {"compare": spec["compare"], "repr": spec["repr"], "hash": spec["hash"]}
        if spec["default"]:
            kwargs["default"] = i
        namespace[name] = dataclasses.field(**kwargs)
    return decorator(**options)(type("Rec", (), namespace))


def _same(a: Any, b: Any) -> None:
    """Call a and b; equal results or the same exception and message."""
    try:
        left = ("ok", a())
    except Exception as exc:
        left = ("raised", type(exc), str(exc))
    try:
        right = ("ok", b())
    except Exception as exc:
        right = ("raised", type(exc), str(exc))
    assert left == right


@settings(max_examples=150, deadline=None)
@given(
    specs=st.lists(FIELD, max_size=4),
    frozen=st.booleans(),
    eq=st.booleans(),
    want_repr=st.booleans(),
    slots=st.booleans(),
    kw_only=st.booleans(),
    values=st.lists(VALUE, min_size=8, max_size=8),
)
def test_a_record_is_the_dataclass_it_declares(
    specs: list[dict[str, Any]],
    frozen: bool,
    eq: bool,
    want_repr: bool,
    slots: bool,
    kw_only: bool,
    values: list[Any],
) -> None:
    options = {"frozen": frozen, "eq": eq, "repr": want_repr, "slots": slots, "kw_only": kw_only}
    mine = _declare(record, specs, options)
    theirs = _declare(dataclasses.dataclass, specs, options)
    n = len(specs)
    names = [f"f{i}" for i in range(n)]
    first = dict(zip(names, values[:n], strict=True))
    second = dict(zip(names, values[4 : 4 + n], strict=True))
    a, b = mine(**first), mine(**second)
    x, y = theirs(**first), theirs(**second)

    assert [f.name for f in dataclasses.fields(mine)] == [
        f.name for f in dataclasses.fields(theirs)
    ]
    assert mine.__match_args__ == theirs.__match_args__
    assert repr(mine.__dataclass_params__) == repr(theirs.__dataclass_params__)
    assert (a == b) == (x == y)
    assert (a == mine(**first)) == (x == theirs(**first))
    assert a.__eq__(x) is NotImplemented and x.__eq__(a) is NotImplemented  # another class
    assert (mine.__hash__ is None) == (theirs.__hash__ is None)
    _same(lambda: hash(a) == hash(b), lambda: hash(x) == hash(y))
    if eq and frozen:
        assert hash(a) == hash(x)  # the same fields hashed, the same way
    if want_repr:
        assert repr(a) == repr(x)
    else:
        assert repr(a).startswith("<") and repr(x).startswith("<")
    assert dataclasses.asdict(a) == dataclasses.asdict(x)
    if n:
        _same(lambda: setattr(a, "f0", 1), lambda: setattr(x, "f0", 1))
        _same(lambda: delattr(b, "f0"), lambda: delattr(y, "f0"))
        assert dataclasses.asdict(dataclasses.replace(a, f0="r")) == dataclasses.asdict(
            dataclasses.replace(x, f0="r")
        )
        match a:
            case mine(f0=value):
                assert value == a.f0
            case _:
                pytest.fail("no match")


def test_positional_patterns_and_signature() -> None:
    import inspect

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


def test_order_goes_to_dataclass_unchanged() -> None:
    @record(order=True, frozen=True)
    class Ordered:
        x: int

    assert Ordered(1) < Ordered(2) and repr(Ordered(1)) == (
        "test_order_goes_to_dataclass_unchanged.<locals>.Ordered(x=1)"
    )


def test_a_subclass_first_compared_uses_the_records_methods() -> None:
    @record(frozen=True)
    class Base:
        x: int

    class Sub(Base):
        pass

    assert Sub(1) == Sub(1) and Sub(1) != Base(1) and hash(Sub(1)) == hash(Base(1))
    assert repr(Sub(2)).endswith("Sub(x=2)") and Base(3) == Base(3)


def test_dataclasses_own_frozen_methods_are_left_in_place() -> None:
    """record's frozen classes get their __setattr__/__delattr__ without compiling
    them; dataclasses' own function is back once the class is defined."""
    before = getattr(dataclasses, "_frozen_get_del_attr", None)

    @record(frozen=True, slots=True)
    class Frozen:
        x: int

    assert getattr(dataclasses, "_frozen_get_del_attr", None) is before
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'x'"):
        del Frozen(1).x
