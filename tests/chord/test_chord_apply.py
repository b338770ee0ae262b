"""Unit tests for the Chord applier and op validation: verbs, index rules, UTF-16, atomicity."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest

from toolfold.chord import (
    MAX_DEPTH,
    ChordError,
    JSONValueError,
    PathError,
    ShapeError,
    UnsafePathError,
    apply,
    check_json,
    is_base,
    utf16_len,
    validate_op,
)


def base() -> dict[str, Any]:
    return {"xs": [1, 2], "s": "héllo😀", "o": {"k": "v", "n": 1}, "rows": [{"t": "a"}]}


def applied(ops: list[Any], target: Any = None) -> Any:
    return apply(base() if target is None else target, ops)


# -- verbs -------------------------------------------------------------------------------------


def test_r_replaces_the_whole_value_and_accepts_no_target() -> None:
    assert apply(None, [["r", {"a": [1]}]]) == {"a": [1]}
    assert apply({"old": 1}, [["r", 5]]) == 5
    assert apply(None, [["r", None], ["r", "x"]]) == "x"


def test_s_sets_keys_creates_keys_replaces_and_appends_elements() -> None:
    assert applied([["s", ["o", "k"], 2]])["o"] == {"k": 2, "n": 1}
    assert applied([["s", ["o", "new"], {"d": [1]}]])["o"]["new"] == {"d": [1]}
    assert applied([["s", ["xs", 0], 9]])["xs"] == [9, 2]
    assert applied([["s", ["xs", 2], 3]])["xs"] == [1, 2, 3]


def test_s_beyond_the_end_of_a_list_is_refused_without_allocating() -> None:
    for index in (3, 4294967290, 2**53 - 1):
        with pytest.raises(
            UnsafePathError, match=r"unsafe path segment: \d+ .*accepts indices 0\.\.2"
        ) as info:
            applied([["s", ["xs", index], 1]])
        assert info.value.segment == index
    # Beyond JavaScript's safe integers an index is no index at all (refused before any walk).
    with pytest.raises(UnsafePathError, match=r"integer index in 0\.\.9007199254740991") as info:
        applied([["s", ["xs", 10**30], 1]])
    assert info.value.segment == 10**30


def test_d_removes_keys_and_elements_and_ignores_missing_keys() -> None:
    value = applied([["d", ["o", "k"]], ["d", ["o", "missing"]], ["d", ["xs", 0]]])
    assert value["o"] == {"n": 1}
    assert value["xs"] == [2]
    with pytest.raises(UnsafePathError, match=r"accepts indices 0\.\.1"):
        applied([["d", ["xs", 2]]])


def test_a_appends_and_t_drops_utf16_units() -> None:
    value = applied([["a", ["s"], "!"], ["a", ["rows", 0, "t"], "bc"]])
    assert value["s"] == "héllo😀!"
    assert value["rows"][0]["t"] == "abc"
    assert applied([["t", ["s"], 5]])["s"] == "😀"
    assert applied([["t", ["s"], 100]])["s"] == ""
    assert applied([["t", ["s"], 0]])["s"] == "héllo😀"


def test_t_counts_utf16_code_units_like_javascript() -> None:
    assert apply({"s": "ab😀cd"}, [["t", ["s"], 4]]) == {"s": "cd"}
    # ZWJ sequence: 🧑‍💻 is U+1F9D1 U+200D U+1F4BB = 2 + 1 + 2 units.
    coder = "🧑\u200d💻"
    assert utf16_len(coder) == 5
    assert apply({"s": coder + "x"}, [["t", ["s"], 5]]) == {"s": "x"}
    assert apply({"s": coder + "x"}, [["t", ["s"], 3]]) == {"s": "💻x"}
    # A flag is two regional indicators, each astral: 4 units.
    flag = "🇯🇵"
    assert utf16_len(flag) == 4
    assert apply({"s": flag + flag}, [["t", ["s"], 4]]) == {"s": flag}
    assert apply({"s": flag}, [["t", ["s"], 2]]) == {"s": "🇵"}


def test_t_splitting_a_surrogate_pair_leaves_a_lone_low_surrogate() -> None:
    value = apply({"s": "a😀b"}, [["t", ["s"], 2], ["a", ["s"], "!"]])
    assert value == {"s": "\ude00b!"}
    assert utf16_len(value["s"]) == 3
    # Such a string still serialises to the JSON text JavaScript would produce.
    assert json.dumps(value["s"]) == '"\\ude00b!"'
    # And can be truncated further.
    assert apply(value, [["t", ["s"], 1]]) == {"s": "b!"}


def test_p_splices_with_javascript_clamping() -> None:
    assert applied([["p", ["xs"], 1, 0, [7, 8]]])["xs"] == [1, 7, 8, 2]
    assert applied([["p", ["xs"], 0, 1, []]])["xs"] == [2]
    assert applied([["p", ["xs"], 10, 0, [9]]])["xs"] == [1, 2, 9]
    assert applied([["p", ["xs"], 1, 99, []]])["xs"] == [1]
    assert applied([["p", ["xs"], 2**53 - 1, 2**53 - 1, ["z"]]])["xs"] == [1, 2, "z"]
    with pytest.raises(ShapeError, match="p index must be a non-negative integer"):
        applied([["p", ["xs"], 10**40, 0, ["z"]]])


def test_p_and_m_may_target_the_root_list() -> None:
    assert apply([1, 2, 3], [["p", [], 0, 1, ["a", "b"]]]) == ["a", "b", 2, 3]
    assert apply([1, 2, 3], [["m", [], [2, 0, 1]]]) == [3, 1, 2]
    with pytest.raises(PathError, match=r"unresolvable path: \[\].*p needs a list, found dict"):
        apply({}, [["p", [], 0, 0, [1]]])


def test_m_reorders_new_i_is_old_perm_i() -> None:
    assert apply({"l": ["a", "b", "c"]}, [["m", ["l"], [1, 2, 0]]]) == {"l": ["b", "c", "a"]}
    with pytest.raises(ShapeError, match="m permutation has 2 entries but the list at"):
        apply({"l": ["a", "b", "c"]}, [["m", ["l"], [1, 0]]])
    with pytest.raises(PathError, match=r"unresolvable path: \['o'\]"):
        applied([["m", ["o"], []]])


def test_whole_floats_are_integers_but_bools_are_not() -> None:
    assert applied([["s", ["xs", 1.0], 5]])["xs"] == [1, 5]
    assert applied([["t", ["s"], 1.0]])["s"] == "éllo😀"
    with pytest.raises(UnsafePathError, match="unsafe path segment: True"):
        applied([["s", ["xs", True], 5]])
    with pytest.raises(ShapeError, match=r"t count must be a non-negative integer, got 1\.5"):
        applied([["t", ["s"], 1.5]])
    with pytest.raises(ShapeError, match="p index must be a non-negative integer, got False"):
        applied([["p", ["xs"], False, 0, []]])


def test_int_segment_on_an_object_addresses_its_decimal_key() -> None:
    # As `obj[0]` does in a JavaScript replica of the same stream.
    assert apply({"o": {"0": "a"}}, [["a", ["o", 0], "b"]]) == {"o": {"0": "ab"}}


def test_tuples_are_accepted_as_ops() -> None:
    value = apply({"xs": [1]}, (("p", ("xs",), 1, 0, (2, 3)), ("s", ("k",), 1)))
    assert value == {"xs": [1, 2, 3], "k": 1}
    assert type(value["xs"]) is list


def test_is_base() -> None:
    assert is_base([["r", 1]])
    assert is_base((("r", 1), ("a", ["x"], "y")))
    assert not is_base([])
    assert not is_base([["s", ["r"], 1], ["r", 1]])
    assert not is_base([None])  # garbage is not a base batch, and does not raise
    assert not is_base(None)  # type: ignore[arg-type]


# -- path resolution ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ([["s", ["nope", "x"], 1]], r"unresolvable path: \['nope'\] at op 0: no key 'nope'"),
        ([["s", ["o", "toString", "x"], 1]], r"unresolvable path: \['o', 'toString'\]"),
        ([["s", ["xs", "length"], 1]], r"key 'length' on a list \(needs an index\)"),
        ([["s", ["xs", 5, "k"], 1]], r"index 5 past the end of a list of 2"),
        ([["s", ["s", "k"], 1]], r"\['s', 'k'\] at op 0: the str at \['s'\] has no members"),
        ([["a", ["o", "n"], "x"]], r"a needs a string, found int"),
        ([["t", ["o", "zz"], 1]], r"t needs an existing string, there is no key 'zz'"),
        ([["s", ["o", "k", "deeper", "x"], 1]], r"the str at \['o', 'k'\] has no members"),
    ],
)
def test_unresolvable_paths_raise_path_error_naming_the_path(ops: list[Any], message: str) -> None:
    target = base()
    before = copy.deepcopy(target)
    with pytest.raises(PathError, match=message) as info:
        apply(target, ops)
    assert info.value.path is not None
    assert target == before


def test_no_value_yet_needs_a_base_batch() -> None:
    with pytest.raises(PathError, match=r"no value yet \(start with an r op\)"):
        apply(None, [["a", ["s"], "x"]])


@pytest.mark.parametrize("segment", ["__proto__", "constructor", "prototype"])
def test_reserved_segments_are_refused_anywhere_in_a_path(segment: str) -> None:
    for ops in (
        [["s", [segment], 1]],
        [["s", ["o", segment, "x"], 1]],
        [["d", [segment]]],
        [["p", [segment], 0, 0, []]],
        [["m", [segment], []]],
    ):
        with pytest.raises(UnsafePathError, match=f"unsafe path segment: '{segment}'") as info:
            apply(base(), ops)
        assert info.value.segment == segment
        with pytest.raises(UnsafePathError):
            validate_op(ops[0])


def test_reserved_names_inside_payloads_replicate_as_plain_keys() -> None:
    value = apply({}, [["s", ["x"], {"__proto__": 1, "constructor": {"prototype": 2}}]])
    assert value == {"x": {"__proto__": 1, "constructor": {"prototype": 2}}}


# -- validation -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "error", "message"),
    [
        (
            ["x", ["a"], 1],
            ShapeError,
            r"unknown op verb: 'x' \(expected one of r, s, d, a, t, p, m\)",
        ),
        ([], ShapeError, "op is empty"),
        ("s", ShapeError, "op is not an array"),
        (None, ShapeError, "op is not an array"),
        ([1, 2], ShapeError, "unknown op verb: 1"),
        (["r"], ShapeError, "r arity"),
        (["s", ["a"]], ShapeError, "s arity"),
        (["d"], ShapeError, "d arity"),
        (["s", [], 1], ShapeError, "path is empty: s needs a non-empty path"),
        (["a", "s", "x"], ShapeError, "path is not an array"),
        (["a", ["s"], None], ShapeError, "a value must be a str, got None"),
        (["t", ["s"], -1], ShapeError, "t count must be a non-negative integer, got -1"),
        (["t", ["s"], math.inf], ShapeError, "t count must be a non-negative integer, got inf"),
        (["t", ["s"], math.nan], ShapeError, "t count"),
        (["p", ["xs"], 0, 0, "abc"], ShapeError, "p items must be a list"),
        (["p", ["xs"], 0, -1, []], ShapeError, "p remove must be a non-negative integer"),
        (["m", ["xs"], [0, 2]], ShapeError, r"m permutation is not a bijection of 0\.\.1"),
        (["m", ["xs"], [0, 0]], ShapeError, "m permutation is not a bijection"),
        (["m", ["xs"], "01"], ShapeError, "m permutation is not an array"),
        (["#", 0, ["x"]], ShapeError, "unknown op verb: '#'"),
        (["s", ["xs", -1], 1], UnsafePathError, "unsafe path segment: -1"),
        (["s", ["xs", 0.5], 1], UnsafePathError, "unsafe path segment: 0.5"),
        (["s", ["xs", None], 1], UnsafePathError, "unsafe path segment: None"),
    ],
)
def test_validate_op_errors_name_the_problem(
    op: Any, error: type[ChordError], message: str
) -> None:
    with pytest.raises(error, match=message):
        validate_op(op)
    target = base()
    with pytest.raises(error, match=message):
        apply(target, [["a", ["s"], "!"], op])
    assert target == base()


def test_error_messages_name_the_op_index_and_stay_short() -> None:
    with pytest.raises(ShapeError, match="at op 2: ") as info:
        apply(base(), [["a", ["s"], "1"], ["a", ["s"], "2"], ["a", ["s"], "x" * 10_000, 3]])
    assert len(str(info.value)) < 400


def test_errors_are_value_errors_and_json_errors_are_type_errors() -> None:
    assert issubclass(ChordError, ValueError)
    assert issubclass(JSONValueError, ShapeError)
    assert issubclass(JSONValueError, TypeError)


# -- payloads: JSON only, copied, bounded ----------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({1, 2}, r"s value at path \['x'\]: set \{1, 2\} is not a JSON value \(use a list\)"),
        ((1, 2), r"tuple \(1, 2\) is not a JSON value \(use a list\)"),
        (b"x", r"bytes b'x' is not a JSON value"),
        (math.nan, r"nan is not a finite number"),
        ({"a": [1, {"b": -math.inf}]}, r"s value at path \['x', 'a', 1, 'b'\]: -inf"),
        ({1: "a"}, r"object key 1 is not a str"),
        ({"k": object()}, r"s value at path \['x', 'k'\]: object <object object at"),
    ],
)
def test_non_json_payloads_are_refused_naming_the_path(payload: Any, message: str) -> None:
    target = base()
    with pytest.raises(JSONValueError, match=message):
        apply(target, [["s", ["o", "k"], "changed"], ["s", ["x"], payload]])
    assert target == base()


def test_check_json_names_the_path_and_accepts_json() -> None:
    check_json({"a": [1, 2.5, None, True, "s", {"b": []}]}, ["root"])
    with pytest.raises(JSONValueError, match=r"value at path \['root', 'a', 0\]") as info:
        check_json({"a": [set()]}, ["root"])
    assert info.value.path == ["root", "a", 0]


def test_cycles_and_deep_nesting_are_refused_not_crashing() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(JSONValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        check_json(cyclic)
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    target = base()
    with pytest.raises(JSONValueError, match="nested deeper"):
        apply(target, [["s", ["x"], deep]])
    assert target == base()
    ok: Any = {}
    for _ in range(MAX_DEPTH - 1):
        ok = {"k": ok}  # exactly MAX_DEPTH nested containers: accepted
    assert apply(None, [["r", ok]]) == ok
    with pytest.raises(JSONValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        apply(None, [["r", [ok]]])


def test_a_deep_path_into_a_deep_value_is_walked_iteratively() -> None:
    value: Any = "x"
    for _ in range(5_000):
        value = {"k": value}
    path = ["k"] * 5_000
    result = apply(value, [["a", path, "y"]])
    node = result
    for _ in range(5_000):
        node = node["k"]
    assert node == "xy"
    with pytest.raises(PathError):
        apply(result, [["a", [*path, "k"], "y"]])


def test_mutating_the_replica_after_apply_never_changes_the_ops() -> None:
    payload = {"rows": [{"t": "a"}]}
    items = [{"id": 1, "tags": ["x"]}]
    ops = [["r", payload], ["p", ["rows"], 1, 0, items], ["s", ["meta"], {"m": [1]}]]
    frozen = copy.deepcopy(ops)
    replica = apply(None, ops)
    replica["rows"][0]["t"] = "changed"
    replica["rows"][1]["tags"].append("y")
    replica["meta"]["m"].append(2)
    assert ops == frozen


def test_mutating_the_ops_after_apply_never_changes_the_replica() -> None:
    payload = {"rows": [{"t": "a"}]}
    items: list[dict[str, Any]] = [{"id": 1, "tags": ["x"]}]
    setv = {"m": [1]}
    replica = apply(None, [["r", payload], ["p", ["rows"], 1, 0, items], ["s", ["meta"], setv]])
    expected = copy.deepcopy(replica)
    payload["rows"][0]["t"] = "changed"
    items[0]["tags"].append("y")
    setv["m"].append(2)
    assert replica == expected


def test_apply_mutates_in_place_and_returns_the_value() -> None:
    target = base()
    result = apply(target, [["a", ["s"], "!"]])
    assert result is target


# -- atomicity ---------------------------------------------------------------------------------------


def test_a_failing_op_reverts_every_earlier_op_of_the_batch() -> None:
    target = {"xs": [1, 2, 3], "o": {"k": "v", "gone": 1}, "s": "abc", "l": [[1], [2]]}
    before = copy.deepcopy(target)
    xs, o, inner = target["xs"], target["o"], target["l"]
    ops = [
        ["s", ["o", "k"], "w"],
        ["s", ["o", "new"], 1],
        ["d", ["o", "gone"]],
        ["d", ["xs", 0]],
        ["s", ["xs", 2], 9],
        ["s", ["xs", 0], 8],
        ["a", ["s"], "def"],
        ["t", ["s"], 2],
        ["p", ["xs"], 1, 1, [5, 6, 7]],
        ["m", ["xs"], [4, 3, 2, 1, 0]],
        ["p", ["l"], 0, 1, []],
        ["s", ["l", 0, 1], 3],
        ["s", ["missing", "x"], 0],
    ]
    with pytest.raises(PathError):
        apply(target, ops)
    assert target == before
    # The same containers were restored, not replaced.
    assert target["xs"] is xs and target["o"] is o and target["l"] is inner


def test_an_r_in_the_middle_then_a_failure_leaves_the_target_alone() -> None:
    target = {"s": "x"}
    with pytest.raises(PathError):
        apply(target, [["a", ["s"], "y"], ["r", {"q": 1}], ["a", ["s"], "z"]])
    assert target == {"s": "x"}


def test_the_happy_path_of_an_r_mid_batch_applies_to_the_new_root() -> None:
    assert apply({"s": "x"}, [["a", ["s"], "y"], ["r", [0]], ["p", [], 1, 0, [1]]]) == [0, 1]


def test_non_list_batches_are_refused() -> None:
    for bad in ({"0": ["r", 1]}, None, "r", 5):
        with pytest.raises(ShapeError, match="a batch must be a list of ops"):
            apply(base(), bad)  # type: ignore[arg-type]
    assert apply({"a": ""}, (op for op in [["a", ["a"], "x"]])) == {"a": "x"}
