"""What a replicated value may be, and the bounds on integer fields and depth: one definition,
enforced with a ChordError wherever a value or a field enters (tracker writes, decode, apply)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolfold.chord import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    ChordError,
    Decoder,
    Encoder,
    JSONValueError,
    ShapeError,
    UnsafePathError,
    apply,
    check_json,
    track,
    validate_op,
    validate_wire_op,
)


def nest(n: int, leaf: Any = 1) -> Any:
    for _ in range(n):
        leaf = [leaf]
    return leaf


# -- a huge integer anywhere is a ChordError, never a plain ValueError --------------------------


@pytest.mark.parametrize(
    "wire",
    [
        [["s", 10**5000, 1]],  # as a path id
        [["s", [10**5000], 1]],  # as a segment
        [["#", 10**5000, ["a"]]],  # as an id definition
        [["t", ["a"], 10**5000]],  # as a count
        [["p", ["a"], 10**5000, 0, []]],  # as a splice index
        [["m", ["a"], [10**5000]]],  # in a permutation
    ],
)
def test_a_huge_integer_field_is_a_chord_error(wire: list[Any]) -> None:
    with pytest.raises(ChordError):
        Decoder().decode(wire)
    with pytest.raises(ChordError):
        validate_wire_op(wire[0])


def test_a_huge_integer_value_is_a_chord_error_naming_its_size() -> None:
    ops = Decoder().decode([["s", ["x"], 10**5000]])
    with pytest.raises(
        JSONValueError, match=r"integer with 16610 bits is beyond ±9007199254740991"
    ):
        apply({}, ops)


# -- integer fields: safe integers only, in Python as in chord.js -------------------------------


@pytest.mark.parametrize("segment", [1e21, 2**53, 2**53 + 1, 2.0**53, 10**30])
def test_integer_segments_beyond_safe_integers_are_refused(segment: Any) -> None:
    """JavaScript reads 2**53 + 1 as 2**53 and spells 1e21 as the key "1e+21": the two sides
    would address different slots, so both refuse such a segment."""
    with pytest.raises(UnsafePathError, match=r"integer index in 0\.\.9007199254740991") as info:
        Decoder().decode([["s", ["o", segment], 1]])
    assert info.value.segment == segment
    with pytest.raises(UnsafePathError):
        validate_op(["s", ["o", segment], 1])
    with pytest.raises(UnsafePathError):
        Encoder().encode([["s", ["o", segment], 1]])


def test_the_largest_safe_integer_is_still_a_segment_and_a_key() -> None:
    ops = Decoder().decode([["s", ["o", float(MAX_SAFE_INTEGER)], 1]])
    assert ops == [["s", ["o", MAX_SAFE_INTEGER], 1]]
    assert apply({"o": {}}, ops) == {"o": {"9007199254740991": 1}}


@pytest.mark.parametrize("count", [2**53, 1e300])
def test_counts_beyond_safe_integers_are_shape_errors(count: Any) -> None:
    with pytest.raises(ShapeError, match="t count must be a non-negative integer"):
        validate_op(["t", ["s"], count])


# -- values: one definition -----------------------------------------------------------------


BAD_VALUES = [
    (2**53, "integer 9007199254740992 is beyond"),
    (-(2**53), "integer -9007199254740992 is beyond"),
    (2**64, "is beyond"),
    (float("nan"), "not a finite number"),
    (float("inf"), "not a finite number"),
    ("a\ud800b", "lone surrogate at index 1"),
    ({"k\udc00": 1}, "object key 'k\\udc00' holds a lone surrogate"),
    ([1, (2, 3)], "tuple"),
]


@pytest.mark.parametrize(("bad", "fragment"), BAD_VALUES)
def test_check_json_refuses_what_no_replica_or_store_can_hold(bad: Any, fragment: str) -> None:
    with pytest.raises(JSONValueError) as info:
        check_json({"rows": [bad]}, ["details"])
    assert fragment in str(info.value)
    assert info.value.path[:3] == ["details", "rows", 0]
    assert "an int within ±9007199254740991" in str(info.value)


@pytest.mark.parametrize(("bad", "fragment"), BAD_VALUES)
def test_the_tracker_refuses_such_a_write_and_changes_nothing(bad: Any, fragment: str) -> None:
    t = track({"details": {}})
    t.flush()
    with pytest.raises(JSONValueError) as info:
        t.state["details"]["n"] = bad
    assert fragment in str(info.value)
    assert info.value.path[:2] == ["details", "n"]
    assert t.target == {"details": {}}
    assert t.flush() == []


@pytest.mark.parametrize(("bad", "fragment"), BAD_VALUES)
def test_apply_refuses_such_a_payload_atomically(bad: Any, fragment: str) -> None:
    target = {"xs": [], "s": "x"}
    for batch in ([["s", ["v"], bad]], [["p", ["xs"], 0, 0, [bad]]], [["r", {"v": bad}]]):
        with pytest.raises(JSONValueError, match="a value is None, bool"):
            apply(target, [["s", ["ok"], 1], *batch])
        assert target == {"xs": [], "s": "x"}


def test_a_text_with_a_lone_surrogate_is_refused_by_apply() -> None:
    target = {"s": "x"}
    for batch in ([["a", ["s"], "\ud83d"]], [["t", ["s"], 0], ["a", ["s"], "\ud83d"]]):
        with pytest.raises(JSONValueError, match="lone surrogate"):
            apply(target, batch)
        assert target == {"s": "x"}


def test_nul_is_an_ordinary_character_in_values() -> None:
    assert apply(None, [["r", {"a\x00": "b\x00"}]]) == {"a\x00": "b\x00"}
    check_json({"a\x00": "b\x00"})


@given(st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER))
def test_every_safe_integer_replicates_exactly(n: int) -> None:
    t = track({"n": 0})
    replica = apply(None, t.flush())
    t.state["n"] = n
    replica = apply(replica, Decoder().decode(Encoder().encode(t.flush())))
    assert replica == {"n": n}


# -- depth: bounded for every replica, across batches ----------------------------------------


def test_a_replica_cannot_grow_deeper_than_max_depth_across_batches() -> None:
    """Each payload alone is shallow; together, written ever deeper, they would nest without
    bound. Apply counts the path a payload is written at, so the replica stops at MAX_DEPTH."""
    replica = apply(None, [["r", {"a": nest(100)}]])
    path: list[Any] = ["a"] + [0] * 99  # where the innermost list of the 100 sits
    replica = apply(replica, [["s", [*path, 0], nest(100)]])  # now 1 + 200 deep
    path += [0] * 100
    with pytest.raises(JSONValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        apply(replica, [["s", [*path, 0], nest(50)]])  # 1 + 200 + 50 > MAX_DEPTH
    with pytest.raises(JSONValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        apply(replica, [["p", path, 0, 0, [nest(50)]]])
    replica = apply(replica, [["s", [*path, 0], nest(49)]])  # exactly MAX_DEPTH: accepted
    depth, node = 0, replica
    while isinstance(node, dict | list):
        depth += 1
        node = node["a"] if isinstance(node, dict) else node[0]
    assert depth == MAX_DEPTH


def test_a_tracker_with_a_smaller_depth_bound_refuses_deeper_writes() -> None:
    t = track({"d": {}}, max_depth=10)
    t.state["d"]["x"] = nest(8)  # root, d, then 8 lists: 10 levels
    with pytest.raises(JSONValueError, match="nested deeper than 10 levels"):
        t.state["d"]["y"] = nest(9)
    with pytest.raises(ChordError, match=r"max_depth must be an int in 1\.\.250"):
        track({}, max_depth=MAX_DEPTH + 1)


_SURROGATE_TEXT = st.text(
    alphabet=st.sampled_from(["a", "é", "\u20ac", "\U0001f600", "\ud800", "\udbff", "\udc00"]),
    max_size=12,
)


@given(_SURROGATE_TEXT)
def test_lone_surrogate_is_the_first_surrogate_code_point(text: str) -> None:
    """The index a bad string is reported at is its first code point in U+D800-U+DFFF
    (what a regex scan for them finds), and there is none exactly when it encodes."""
    from toolfold.chord._ops import lone_surrogate

    first = next((i for i, c in enumerate(text) if 0xD800 <= ord(c) <= 0xDFFF), None)
    assert lone_surrogate(text) == first
    if first is not None:
        with pytest.raises(JSONValueError, match=f"lone surrogate at index {first} "):
            check_json([text])
