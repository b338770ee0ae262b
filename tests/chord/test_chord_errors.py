"""Every refusal of the applier and the decoder, word for word: the error class, the message
(which op, which path, what was found, what to do) and the ``path`` the error carries.

A message that names the wrong op or a shorter path sends a reader to the wrong place, and a
refusal that becomes a generic ``ChordError`` hides which rule was broken, so these are pinned
exactly rather than matched loosely.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolfold.chord import (
    ChordError,
    Decoder,
    Encoder,
    JSONValueError,
    PathError,
    ShapeError,
    UnsafePathError,
    apply,
)

JSON_RULE = (
    "a value is None, bool, an int within ±9007199254740991, a finite float, a str without "
    "lone surrogates, a list, or a dict with such str keys, at most 250 levels deep"
)

APPLY_REFUSALS: list[tuple[Any, list[Any], type[ChordError], str, Any]] = [
    # (target, batch, error class, message, error.path; None when the class has no path)
    (5, [["s", ["a"], 1]], PathError,
     "unresolvable path: ['a'] at op 0: the int at [] has no members", ["a"]),
    (None, [["s", ["a"], 1]], PathError,
     "unresolvable path: ['a'] at op 0: no value yet (start with an r op)", ["a"]),
    ({"a": 5}, [["s", ["a"], 2], ["s", ["a", "b", "c"], 1]], PathError,
     "unresolvable path: ['a', 'b'] at op 1: the int at ['a'] has no members", ["a", "b"]),
    ({"xs": [1]}, [["s", ["xs", "k", "c"], 1]], PathError,
     "unresolvable path: ['xs', 'k'] at op 0: key 'k' on a list (needs an index)", ["xs", "k"]),
    ({"xs": [1]}, [["s", ["xs", 1, "c"], 1]], PathError,
     "unresolvable path: ['xs', 1] at op 0: index 1 past the end of a list of 1", ["xs", 1]),
    ({"xs": [1]}, [["s", ["xs", 3, "c"], 1]], PathError,
     "unresolvable path: ['xs', 3] at op 0: index 3 past the end of a list of 1", ["xs", 3]),
    ({"xs": [1]}, [["s", ["xs", "k"], 1]], PathError,
     "unresolvable path: ['xs', 'k'] at op 0: key 'k' on a list (needs an index)", ["xs", "k"]),
    ({"xs": [1]}, [["d", ["xs", "k"]]], PathError,
     "unresolvable path: ['xs', 'k'] at op 0: key 'k' on a list (needs an index)", ["xs", "k"]),
    ({"xs": [1]}, [["s", ["xs", 2], 1]], UnsafePathError,
     "unsafe path segment: 2 in path ['xs', 2] at op 0: s on a list of 1 accepts indices 0..1",
     None),
    ({"xs": [1]}, [["d", ["xs", 1]]], UnsafePathError,
     "unsafe path segment: 1 in path ['xs', 1] at op 0: d on a list of 1 accepts indices 0..0",
     None),
    ({"xs": ["a"]}, [["a", ["xs", 1], "x"]], UnsafePathError,
     "unsafe path segment: 1 in path ['xs', 1] at op 0: a on a list of 1 accepts indices 0..0",
     None),
    ({"xs": ["a"]}, [["t", ["xs", 1], 1]], UnsafePathError,
     "unsafe path segment: 1 in path ['xs', 1] at op 0: t on a list of 1 accepts indices 0..0",
     None),
    ({"xs": ["a"]}, [["a", ["xs", "k"], "x"]], PathError,
     "unresolvable path: ['xs', 'k'] at op 0: key 'k' on a list (needs an index)", ["xs", "k"]),
    ({"o": {}}, [["a", ["o", "k"], "x"]], PathError,
     "unresolvable path: ['o', 'k'] at op 0: a needs an existing string, there is no key 'k'",
     ["o", "k"]),
    ({"o": {"k": 1}}, [["t", ["o", "k"], 1]], PathError,
     "unresolvable path: ['o', 'k'] at op 0: t needs a string, found int", ["o", "k"]),
    ({"o": 5}, [["a", ["o", "k"], "x"]], PathError,
     "unresolvable path: ['o', 'k'] at op 0: the int at ['o'] has no members", ["o", "k"]),
    (5, [["a", ["k"], "x"]], PathError,
     "unresolvable path: ['k'] at op 0: the int at [] has no members", ["k"]),
    (None, [["a", ["k"], "x"]], PathError,
     "unresolvable path: ['k'] at op 0: no value yet (start with an r op)", ["k"]),
    ({"o": 5}, [["d", ["o", "k"]]], PathError,
     "unresolvable path: ['o', 'k'] at op 0: the int at ['o'] has no members", ["o", "k"]),
    (5, [["d", ["k"]]], PathError,
     "unresolvable path: ['k'] at op 0: the int at [] has no members", ["k"]),
    (None, [["d", ["k"]]], PathError,
     "unresolvable path: ['k'] at op 0: no value yet (start with an r op)", ["k"]),
    ({"a": "x"}, [["a", ["a"], "\ud800"]], JSONValueError,
     f"a text at path ['a'] at op 0: holds a lone surrogate at index 0; {JSON_RULE}", ["a"]),
    # A t and the a after it on the same path are applied as one step: still named, still op 0.
    ({"a": "xy"}, [["t", ["a"], 1], ["a", ["a"], "z\ud800"]], JSONValueError,
     f"a text at path ['a'] at op 0: holds a lone surrogate at index 1; {JSON_RULE}", ["a"]),
    ({"b": 1}, [["s", ["b"], 2], ["t", ["zz"], 1], ["a", ["zz"], "x"]], PathError,
     "unresolvable path: ['zz'] at op 1: t needs an existing string, there is no key 'zz'",
     ["zz"]),
    (None, 5, ShapeError, "a batch must be a list of ops, got 5", None),
    ({"o": 5}, [["p", ["o"], 0, 0, []]], PathError,
     "unresolvable path: ['o'] at op 0: p needs a list, found int", ["o"]),
    ({"o": [[]]}, [["m", ["o", 1], []]], PathError,
     "unresolvable path: ['o', 1] at op 0: index 1 past the end of a list of 1", ["o", 1]),
    ({"o": [1, 2]}, [["m", ["o"], [0]]], ShapeError,
     "m permutation has 1 entries but the list at ['o'] has 2 at op 0; send a base batch "
     "instead", None),
    ({"a": 1}, [["s", ["a"], 2], ["s", ["zz", "q"], 1]], PathError,
     "unresolvable path: ['zz'] at op 1: no key 'zz'", ["zz"]),
    (None, [["r", {1: 2}]], JSONValueError,
     f"r value at path []: object key 1 is not a str; {JSON_RULE}", []),
    ([1], [["p", [], 0, 0, [{1: 2}]]], JSONValueError,
     f"p items at path [0]: object key 1 is not a str; {JSON_RULE}", [0]),
    ({"o": [1]}, [["p", ["o"], 0, 0, ({"k": {2: 3}},)]], JSONValueError,
     f"p items at path ['o', 0, 'k']: object key 2 is not a str; {JSON_RULE}", ["o", 0, "k"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("target", "batch", "error", "message", "path"),
    APPLY_REFUSALS,
    ids=[f"{c[2].__name__}-{i}" for i, c in enumerate(APPLY_REFUSALS)],
)
def test_apply_refusals_name_the_op_the_path_and_the_rule(
    target: Any, batch: list[Any], error: type[ChordError], message: str, path: Any
) -> None:
    before = copy.deepcopy(target)
    with pytest.raises(ChordError) as info:
        apply(target, batch)
    assert type(info.value) is error
    assert str(info.value) == message
    if path is not None:
        assert info.value.path == path  # type: ignore[attr-defined]
    assert target == before


def test_an_int_segment_inside_a_path_addresses_the_decimal_key_of_an_object() -> None:
    assert apply({"0": {"a": 1}}, [["s", [0, "a"], 2]]) == {"0": {"a": 2}}
    assert apply({"0": ["x"]}, [["a", [0, 0], "y"]]) == {"0": ["xy"]}
    assert apply({"7": 1, "k": 2}, [["d", [7]]]) == {"k": 2}
    assert apply({"7": "abc"}, [["t", [7], 1]]) == {"7": "bc"}


def test_a_t_is_fused_only_with_an_a_on_the_same_path() -> None:
    # Any other op after a t stays an op of its own.
    assert apply({"x": "abc"}, [["t", ["x"], 1], ["s", ["x"], "new"]]) == {"x": "new"}
    assert apply({"x": "abc"}, [["t", ["x"], 1], ["t", ["x"], 1]]) == {"x": "c"}
    assert apply({"x": "abc", "y": ""}, [["t", ["x"], 1], ["a", ["y"], "z"]]) == {
        "x": "bc",
        "y": "z",
    }


@pytest.mark.parametrize(
    "done",
    [
        [["t", ["x"], 1], ["a", ["x"], "z"]],  # the fused t + a
        [["d", ["missing"]]],  # a no-op delete must not come back as a key
        [["d", ["x"]], ["d", ["missing"]]],
        [["m", ["xs"], [2, 0, 1]]],
    ],
)
def test_a_failure_later_in_the_batch_undoes_it(done: list[Any]) -> None:
    target = {"x": "abc", "xs": [1, 2, 3]}
    with pytest.raises(PathError):
        apply(target, [*done, ["s", ["zz", "q"], 1]])
    assert target == {"x": "abc", "xs": [1, 2, 3]}


DECODE_REFUSALS: list[tuple[Any, type[ChordError], str, Any]] = [
    (5, ShapeError, "wire is not iterable: a batch must be a list of ops, got 5", None),
    ("ab", ShapeError, "wire is not iterable: a batch must be a list of ops, got 'ab'", None),
    ([["s", 1]], PathError,
     "unresolvable path: [] at op 0: short form ['s', 1] has no previous op in this batch to "
     "take its path from", []),
    # An r forgets the previous path: a short form right after it has nothing to take.
    ([["s", ["a"], 1], ["r", {}], ["s", 1]], PathError,
     "unresolvable path: [] at op 2: short form ['s', 1] has no previous op in this batch to "
     "take its path from", []),
    ([["s", ["a"], 1], ["s", 3, 1]], PathError,
     "unresolvable path: 3 at op 1: id 3 is not defined in this stream (ids reset at every r; "
     "resume from a base batch with a fresh decoder)", 3),
    ([["r", {}], ["s", [], 1]], PathError,
     "unresolvable path: [] at op 1: s needs a non-empty path (only p and m may target the "
     "root; r replaces it)", []),
    ([["s", ["a"], 1], ["q"]], ShapeError,
     "unknown op verb: 'q' (expected one of r, s, d, a, t, p, m, #) at op 1: ['q']", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("wire", "error", "message", "path"),
    DECODE_REFUSALS,
    ids=[f"{c[1].__name__}-{i}" for i, c in enumerate(DECODE_REFUSALS)],
)
def test_decode_refusals_name_the_op_the_path_and_the_rule(
    wire: Any, error: type[ChordError], message: str, path: Any
) -> None:
    with pytest.raises(ChordError) as info:
        Decoder().decode(wire)
    assert type(info.value) is error
    assert str(info.value) == message
    if path is not None:
        assert info.value.path == path  # type: ignore[attr-defined]


def test_encode_refusals_name_the_op() -> None:
    with pytest.raises(ShapeError) as info:
        Encoder().encode([["s", ["a"], 1], ["q"]])
    assert str(info.value) == (
        "unknown op verb: 'q' (expected one of r, s, d, a, t, p, m) at op 1: ['q']"
    )
    with pytest.raises(ShapeError) as info:
        Encoder().encode(5)  # type: ignore[arg-type]
    assert str(info.value) == "batch is not iterable: a batch must be a list of ops, got 5"


def test_encode_and_decode_take_any_iterable_of_ops() -> None:
    ops = [["s", ["a"], 1], ["s", ["a"], 2]]
    wire = Encoder().encode(op for op in ops)
    assert wire == [["s", ["a"], 1], ["s", 2]]
    assert Decoder().decode(iter(wire)) == ops
    assert Decoder().decode(tuple(wire)) == ops
