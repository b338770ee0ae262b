"""Unit tests for the Chord wire codec: short forms, interned ids, resets, decoder safety."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from toolfold.chord import (
    ChordError,
    Decoder,
    Encoder,
    PathError,
    ShapeError,
    UnsafePathError,
    apply,
    validate_wire_op,
)


def roundtrip(batches: list[list[Any]]) -> list[list[Any]]:
    encoder, decoder = Encoder(), Decoder()
    return [decoder.decode(encoder.encode(batch)) for batch in batches]


def test_spec_example_three_batches() -> None:
    encoder = Encoder()
    ops = [
        [["a", ["x"], "1"]],
        [["a", ["x"], "2"]],
        [["a", ["x"], "3"], ["a", ["y"], "4"]],
    ]
    assert [encoder.encode(b) for b in ops] == [
        [["a", ["x"], "1"]],
        [["#", 0, ["x"]], ["a", 0, "2"]],
        [["a", 0, "3"], ["a", ["y"], "4"]],
    ]
    assert roundtrip(ops) == ops


def test_short_forms_for_every_verb_and_arity_tells_them_apart() -> None:
    batch = [
        ["s", ["x"], "v"],
        ["a", ["x"], "w"],
        ["t", ["x"], 1],
        ["d", ["x"]],
        ["p", ["l"], 0, 0, [1]],
        ["p", ["l"], 1, 0, [2]],
        ["m", ["l"], [1, 0]],
        ["s", ["l", 0], [1, 2]],
        ["s", ["l", 0], ["x", ["y"]]],
    ]
    wire = Encoder().encode(batch)
    assert wire == [
        ["s", ["x"], "v"],
        ["a", "w"],
        ["t", 1],
        ["d"],
        ["p", ["l"], 0, 0, [1]],
        ["p", 1, 0, [2]],
        ["m", [1, 0]],
        ["s", ["l", 0], [1, 2]],
        ["s", ["x", ["y"]]],  # a short s whose value looks like a path: arity 2 is short
    ]
    assert Decoder().decode(wire) == batch


def test_previous_path_resets_per_batch_and_hash_is_never_previous() -> None:
    encoder = Encoder()
    assert encoder.encode([["a", ["x"], "1"]]) == [["a", ["x"], "1"]]
    # Same path as the last op of the previous batch: no short form across batches.
    assert encoder.encode([["a", ["x"], "2"], ["a", ["x"], "3"]]) == [
        ["#", 0, ["x"]],
        ["a", 0, "2"],
        ["a", "3"],
    ]
    decoder = Decoder()
    assert decoder.decode([["a", ["s"], "x"], ["#", 0, ["o"]], ["a", "y"]]) == [
        ["a", ["s"], "x"],
        ["a", ["s"], "y"],
    ]
    with pytest.raises(PathError, match=r"short form .* has no previous op in this batch"):
        decoder.decode([["a", "y"]])


def test_zero_and_string_zero_are_different_paths_but_whole_floats_are_ints() -> None:
    encoder = Encoder()
    assert encoder.encode([["s", ["0"], 1], ["s", [0], 2], ["s", ["0"], 3]]) == [
        ["s", ["0"], 1],
        ["s", [0], 2],
        ["#", 0, ["0"]],
        ["s", 0, 3],
    ]
    encoder = Encoder()
    wire = encoder.encode([["s", ["l", 1.0], 1], ["s", ["k"], 1], ["s", ["l", 1], 2]])
    assert wire == [["s", ["l", 1], 1], ["s", ["k"], 1], ["#", 0, ["l", 1]], ["s", 0, 2]]
    assert json.dumps(wire[0]) == '["s", ["l", 1], 1]'


def test_ids_count_from_zero_in_order_of_second_use_and_r_resets_them() -> None:
    encoder = Encoder()
    wire = encoder.encode(
        [["s", ["a"], 1], ["s", ["b"], 1], ["s", ["a"], 2], ["s", ["b"], 2], ["s", ["a"], 3]]
    )
    assert wire == [
        ["s", ["a"], 1],
        ["s", ["b"], 1],
        ["#", 0, ["a"]],
        ["s", 0, 2],
        ["#", 1, ["b"]],
        ["s", 1, 2],
        ["s", 0, 3],
    ]
    wire = encoder.encode([["r", {}], ["s", ["b"], 1], ["s", ["a"], 1], ["s", ["b"], 2]])
    assert wire == [["r", {}], ["s", ["b"], 1], ["s", ["a"], 1], ["#", 0, ["b"]], ["s", 0, 2]]


def test_decoder_r_resets_ids() -> None:
    decoder = Decoder()
    decoder.decode([["#", 0, ["o", "k"]], ["s", 0, "w"]])
    with pytest.raises(
        PathError, match="unresolvable path: 0 at op 1: id 0 is not defined"
    ) as info:
        decoder.decode([["r", {"o": {"k": "v"}}], ["s", 0, "z"]])
    assert info.value.path == 0


def test_reset_forgets_every_path_and_id_like_an_r() -> None:
    # A reader that restarts: the host resets its encoder, the reader starts a new decoder.
    encoder, decoder = Encoder(), Decoder()
    decoder.decode(encoder.encode([["s", ["a"], 1], ["s", ["b"], 1], ["s", ["a"], 2]]))
    encoder.reset()
    decoder.reset()
    with pytest.raises(PathError, match="id 0 is not defined"):
        decoder.decode([["s", 0, 3]])
    # Forgotten: first use is inline again, the second defines id 0 afresh.
    wire = encoder.encode([["s", ["a"], 3], ["s", ["b"], 2], ["s", ["a"], 4]])
    assert wire == [["s", ["a"], 3], ["s", ["b"], 2], ["#", 0, ["a"]], ["s", 0, 4]]
    assert decoder.decode(wire) == [["s", ["a"], 3], ["s", ["b"], 2], ["s", ["a"], 4]]


def test_root_path_is_a_path_too() -> None:
    batch = [["p", [], 0, 0, [1]], ["p", [], 1, 0, [2]], ["s", [0], 3], ["p", [], 0, 1, []]]
    wire = Encoder().encode(batch)
    assert wire == [
        ["p", [], 0, 0, [1]],
        ["p", 1, 0, [2]],
        ["s", [0], 3],
        ["#", 0, []],
        ["p", 0, 0, 1, []],
    ]
    assert Decoder().decode(wire) == batch
    assert apply(None, [["r", []], *Decoder().decode(wire)]) == [2]


@pytest.mark.parametrize(
    ("wire", "error", "message"),
    [
        (
            [["d"]],
            PathError,
            r"unresolvable path: \[\] at op 0: short form \['d'\] has no previous",
        ),
        ([["s", [], 1]], PathError, r"unresolvable path: \[\] at op 0: s needs a non-empty path"),
        ([["#", 0, []], ["a", 0, "x"]], PathError, "a needs a non-empty path"),
        ([["s", 7, 1]], PathError, "id 7 is not defined in this stream"),
        ([["#", 1.5, ["o"]]], ShapeError, r"# shape: expected \['#', id"),
        ([["#", "0", ["o"]]], ShapeError, "# shape"),
        ([["#", 0, None]], ShapeError, "# shape"),
        ([["#", 0]], ShapeError, "# shape"),
        ([["a", 5]], ShapeError, "a value must be a str, got 5"),
        ([["p", 0, 0, "abc"]], ShapeError, "p items must be a list"),
        ([["t", ["s"], 1, 2]], ShapeError, r"t arity: 4 elements \(expected 2 or 3\)"),
        ([["a", "s", "x"]], ShapeError, r"path is not an array \(nor a path id\): 's'"),
        ([["a", -1, "x"]], ShapeError, "path is not an array"),
        ([["a", True, "x"]], ShapeError, "path is not an array"),
        (
            [["zz", 1]],
            ShapeError,
            r"unknown op verb: 'zz' \(expected one of r, s, d, a, t, p, m, #\)",
        ),
        ([[None]], ShapeError, "unknown op verb: None"),
        ([[]], ShapeError, "op is empty"),
        ([7], ShapeError, "op is not an array"),
        ([["#", 0, ["__proto__"]]], UnsafePathError, "unsafe path segment: '__proto__'"),
        ([["s", ["a", "prototype"], 1]], UnsafePathError, "unsafe path segment: 'prototype'"),
        ([["m", [0, 2]]], ShapeError, "m permutation is not a bijection"),
    ],
)
def test_decoder_errors(wire: list[Any], error: type[ChordError], message: str) -> None:
    decoder = Decoder()
    with pytest.raises(error, match=message):
        decoder.decode(wire)


@pytest.mark.parametrize("wire", [{"0": ["r", 1]}, None, "ra", 5])
def test_decoder_refuses_non_list_batches(wire: Any) -> None:
    with pytest.raises(ShapeError, match="wire is not iterable"):
        Decoder().decode(wire)


def test_reserved_segments_through_an_interned_id_are_refused() -> None:
    # The definition is refused...
    with pytest.raises(UnsafePathError, match="'constructor'"):
        Decoder().decode([["#", 0, ["constructor"]], ["s", 0, 1]])
    # ...and even a decoder whose table was tampered with re-checks the decoded op.
    decoder = Decoder()
    decoder._paths[0] = ["__proto__", "x"]
    with pytest.raises(UnsafePathError, match="'__proto__'"):
        decoder.decode([["s", 0, 1]])


def test_a_failed_decode_does_not_poison_the_id_table() -> None:
    decoder = Decoder()
    decoder.decode([["#", 0, ["a"]], ["#", 1, ["b"]]])
    with pytest.raises(ShapeError):
        decoder.decode([["#", 0, ["x"]], ["#", 5, ["y"]], ["r", {}], ["#", 1, ["z"]], ["bad"]])
    assert decoder.decode([["s", 0, 1], ["s", 1, 2]]) == [["s", ["a"], 1], ["s", ["b"], 2]]
    with pytest.raises(PathError, match="id 5 is not defined"):
        decoder.decode([["s", 5, 1]])


def test_a_failed_encode_emits_nothing_and_keeps_the_tables() -> None:
    encoder = Encoder()
    encoder.encode([["s", ["a"], 1]])
    with pytest.raises(UnsafePathError):
        encoder.encode([["s", ["a"], 2], ["r", {}], ["s", ["__proto__"], 1]])
    assert encoder.encode([["s", ["a"], 3]]) == [["#", 0, ["a"]], ["s", 0, 3]]
    with pytest.raises(ShapeError, match="batch is not iterable"):
        encoder.encode(None)  # type: ignore[arg-type]


def test_validate_wire_op_accepts_every_wire_form() -> None:
    for op in (
        ["r", None],
        ["s", 1],
        ["s", 0, 1],
        ["s", ["a"], 1],
        ["d"],
        ["d", 3],
        ["a", "x"],
        ["t", 2.0],
        ["p", 0, 0, []],
        ["p", [], 0, 0, []],
        ["m", []],
        ["#", 0, []],
        ("#", 2, ("a", 1)),
    ):
        validate_wire_op(op)
    with pytest.raises(ShapeError, match="# shape"):
        validate_wire_op(["#", -1, ["a"]])


def test_decoded_ops_do_not_share_paths() -> None:
    decoder = Decoder()
    ops = decoder.decode([["#", 0, ["x"]], ["a", 0, "1"], ["a", "2"], ["a", 0, "3"]])
    ops[0][1].append("mutated")
    assert ops[1][1] == ["x"]
    assert decoder.decode([["a", 0, "4"]]) == [["a", ["x"], "4"]]


def test_encoder_output_does_not_change_the_input_ops() -> None:
    batch = [["a", ["x"], "1"], ["a", ["y"], "2"], ["a", ["x"], "3"]]
    frozen = copy.deepcopy(batch)
    wire = Encoder().encode(batch)
    json.dumps(wire)
    assert batch == frozen


def test_each_decoder_is_one_stream() -> None:
    encoder = Encoder()
    first = encoder.encode([["r", {"x": ""}]])
    second = encoder.encode([["a", ["x"], "1"]])
    third = encoder.encode([["a", ["x"], "2"]])
    fourth = encoder.encode([["a", ["x"], "3"]])
    assert fourth == [["a", 0, "3"]]
    # A fresh decoder started at the base reaches the same value as the long-running one.
    replica = None
    decoder = Decoder()
    for wire in (first, second, third, fourth):
        replica = apply(replica, decoder.decode(wire))
    assert replica == {"x": "123"}
    # A decoder that joins mid-stream (no base) cannot resolve the id: loud, not wrong.
    with pytest.raises(PathError):
        Decoder().decode(fourth)
