"""Unit tests of the tracker: every mutator, the documented op examples, folding, the pending bound,
value checks (messages and intactness), held references and the plain-container surface."""

from __future__ import annotations

import copy
import datetime
import decimal
import json
import random
from collections.abc import Mapping, MutableMapping, MutableSequence
from typing import Any

import orjson
import pytest

from toolfold.chord import (
    MAX_DEPTH,
    ChordError,
    Decoder,
    Encoder,
    JSONValueError,
    PathError,
    TrackedDict,
    TrackedList,
    Tracker,
    UnsafePathError,
    apply,
    track,
)


class Replica:
    """A consumer of one tracker's stream; checks every batch against the tracker."""

    def __init__(self, t: Tracker) -> None:
        self.t = t
        self.enc, self.dec = Encoder(), Decoder()
        self.value: Any = None
        self.sync()

    def sync(self) -> list[Any]:
        batch = self.t.flush()
        wire = json.loads(json.dumps(self.enc.encode(batch)))
        self.value = apply(self.value, self.dec.decode(wire))
        assert self.value == self.t.target
        return batch


def tracked(value: Any) -> tuple[Tracker, Replica]:
    t = track(value)
    return t, Replica(t)


def words(n: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    out = []
    while sum(map(len, out)) < n:
        out.append("".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(1, 8))))
    return " ".join(out)[:n]


# -- the documented examples (docs/tracker.md) -----------------------------------------------------


def test_seed_examples_one_op_each() -> None:
    t, r = tracked(
        {
            "content": [{"type": "text", "text": "hi"}],
            "details": {"passed": 0, "current": "test_a"},
            "failures": [],
        }
    )
    t.state["details"]["passed"] += 1
    assert r.sync() == [["s", ["details", "passed"], 1]]
    t.state["failures"].append({"name": "test_b"})
    assert r.sync() == [["p", ["failures"], 0, 0, [{"name": "test_b"}]]]
    del t.state["details"]["current"]
    assert r.sync() == [["d", ["details", "current"]]]
    t.state["content"][0]["text"] += " there"
    assert r.sync() == [["a", ["content", 0, "text"], " there"]]


def test_rolling_window_is_truncate_plus_append() -> None:
    t, r = tracked({"text": words(50_000)})
    for i in range(5):
        chunk = words(32, seed=100 + i)
        t.state["text"] = t.state["text"][32:] + chunk
        assert r.sync() == [["t", ["text"], 32], ["a", ["text"], chunk]]


def test_first_flush_is_base_and_nothing_else_makes_r() -> None:
    t = track({"a": ""})
    assert t.dirty
    assert t.flush() == [["r", {"a": ""}]]
    assert not t.dirty
    assert t.flush() == []
    for i in range(50):
        t.state["a"] += str(i)
        assert t.flush()[0][0] == "a"


def test_strings_count_utf16_units() -> None:
    t, r = tracked({"s": "ab😀cd--------"})
    t.state["s"] = "cd--------XY"
    assert r.sync() == [["t", ["s"], 4], ["a", ["s"], "XY"]]
    t.state["s"] = "🎉" + "x"
    assert r.sync() == [["s", ["s"], "🎉x"]]
    t.state["s"] += "🇯🇵"
    assert r.sync() == [["a", ["s"], "🇯🇵"]]


def test_string_rewrites_without_overlap_are_s_and_repeats_collapse() -> None:
    t, r = tracked({"s": "hello"})
    t.state["s"] = "x"
    t.state["s"] = "yy"
    t.state["s"] = "hello world"
    assert r.sync() == [["a", ["s"], " world"]]  # diffed against the anchor, not "yy"
    t.state["s"] = "zzz"
    assert r.sync() == [["s", ["s"], "zzz"]]
    t.state["s"] = "zzz"
    assert r.sync() == []


def test_overlap_scan_is_bounded() -> None:
    t = track({"s": "0123456789"}, max_overlap_scan=4)
    r = Replica(t)
    t.state["s"] = "23456789ab"  # overlap of 8 units is beyond the 4-unit window
    assert r.sync() == [["s", ["s"], "23456789ab"]]
    t.state["s"] = "abcd"
    assert r.sync() == [["t", ["s"], 8], ["a", ["s"], "cd"]]
    with pytest.raises(ChordError, match="max_overlap_scan must be a non-negative int"):
        track({}, max_overlap_scan=-1)


def test_repetitive_text_falls_back_to_s_but_stays_correct() -> None:
    t, r = tracked({"s": "ab" * 5000})
    t.state["s"] = t.state["s"][3:] + "ab" * 10 + "x"
    batch = r.sync()
    assert batch[0][0] in "ts"


# -- dict mutators ---------------------------------------------------------------------------------


def test_dict_mutators() -> None:
    t, r = tracked({"d": {"a": 1, "b": 2, "c": 3}})
    d = t.state["d"]
    d.update({"a": 10}, b=20)
    assert r.sync() == [["s", ["d", "a"], 10], ["s", ["d", "b"], 20]]
    assert d.setdefault("a", 99) == 10
    assert d.setdefault("e", 5) == 5
    assert r.sync() == [["s", ["d", "e"], 5]]
    assert d.pop("e") == 5
    assert d.pop("missing", "dflt") == "dflt"
    assert r.sync() == [["d", ["d", "e"]]]
    assert d.popitem() == ("c", 3)
    assert r.sync() == [["d", ["d", "c"]]]
    d |= {"z": [1]}
    assert r.sync() == [["s", ["d", "z"], [1]]]
    d.clear()
    assert r.sync() == [["s", ["d"], {}]]
    with pytest.raises(KeyError):
        del d["nope"]
    with pytest.raises(KeyError):
        d.pop("nope")
    with pytest.raises(KeyError):
        d.popitem()


def test_root_dict_clear_is_r_and_state_ior_is_not() -> None:
    t, r = tracked({"a": 1})
    t.state |= {"b": 2}
    assert r.sync() == [["s", ["b"], 2]]
    t.state.clear()
    assert r.sync() == [["r", {}]]


# -- list mutators ---------------------------------------------------------------------------------


def test_list_mutators_are_splices_at_call_time() -> None:
    t, r = tracked({"l": [1, 2, 3]})
    log = t.state["l"]
    log.append(4)
    assert r.sync() == [["p", ["l"], 3, 0, [4]]]
    log.insert(0, 0)
    assert r.sync() == [["p", ["l"], 0, 0, [0]]]
    assert log.pop() == 4
    assert r.sync() == [["p", ["l"], 4, 1, []]]
    log.extend([7, 8])
    assert r.sync() == [["p", ["l"], 4, 0, [7, 8]]]
    log.remove(7)
    assert r.sync() == [["p", ["l"], 4, 1, []]]
    del log[0]
    assert r.sync() == [["p", ["l"], 0, 1, []]]
    del log[1:3]
    assert r.sync() == [["p", ["l"], 1, 2, []]]
    log[0:1] = ["a", "b"]
    assert r.sync() == [["p", ["l"], 0, 1, ["a", "b"]]]
    log += ["c"]
    assert r.sync() == [["p", ["l"], 3, 0, ["c"]]]
    log *= 2
    assert r.sync() == [["p", ["l"], 4, 0, ["a", "b", 8, "c"]]]
    log[1] = "B"
    assert r.sync() == [["s", ["l", 1], "B"]]
    log.reverse()
    assert r.sync() == [["m", ["l"], [7, 6, 5, 4, 3, 2, 1, 0]]]
    log.sort(key=str)
    assert r.sync()[0][0] == "m"
    log.clear()
    assert r.sync() == [["s", ["l"], []]]
    with pytest.raises(IndexError):
        log.pop()
    with pytest.raises(ValueError):
        log.remove(1)


def test_adjacent_inserts_merge_and_cancel() -> None:
    t, r = tracked({"l": [0]})
    log = t.state["l"]
    log.append(1)
    log.append(2)
    log.extend([3, 4])
    log.insert(1, 0.5)
    assert r.sync() == [["p", ["l"], 1, 0, [0.5, 1, 2, 3, 4]]]
    log.append("x")
    log.pop()
    assert r.sync() == []


def test_root_list_whole_splice_is_r_and_sort_is_m() -> None:
    t, r = tracked([3, 1, 2])
    t.state.sort()
    assert r.sync() == [["m", [], [1, 2, 0]]]
    t.state += [4]
    assert r.sync() == [["p", [], 3, 0, [4]]]
    t.state[:] = ["x"]
    assert r.sync() == [["r", ["x"]]]


def test_index_beyond_len_is_refused() -> None:
    t, r = tracked({"l": [1]})
    with pytest.raises(IndexError) as info:
        t.state["l"][1] = 2
    assert isinstance(info.value, PathError)
    assert "list index 1 out of range for assignment at path ['l'] (length 1)" in str(info.value)
    assert t.target == {"l": [1]}
    assert r.sync() == []


# -- structural diff and folding ---------------------------------------------------------------------


def test_container_over_container_is_diffed() -> None:
    msg = {"role": "assistant", "text": "Hello", "meta": {"n": 1, "drop": True}}
    t, r = tracked({"messages": [msg]})
    longer = {"role": "assistant", "text": "Hello, world", "meta": {"n": 2}}
    t.state["messages"][0] = longer
    assert r.sync() == [
        ["a", ["messages", 0, "text"], ", world"],
        ["d", ["messages", 0, "meta", "drop"]],
        ["s", ["messages", 0, "meta", "n"], 2],
    ]
    t.state["messages"] = [longer, {"role": "user", "text": "hi"}]
    assert r.sync() == [["p", ["messages"], 1, 0, [{"role": "user", "text": "hi"}]]]


def test_json_equality_tells_bool_from_int() -> None:
    t, r = tracked({"l": [1, True]})
    t.state["l"] = [True, 1]
    assert r.sync() == [["s", ["l", 0], True], ["s", ["l", 1], 1]]


def test_writes_inside_pending_payloads_fold() -> None:
    t, r = tracked({"items": []})
    t.state["items"].append({"id": 1, "text": ""})
    t.state["items"][0]["text"] += "abc"
    t.state["items"][0]["tags"] = ["x"]
    t.state["items"][0]["tags"].append("y")
    assert r.sync() == [["p", ["items"], 0, 0, [{"id": 1, "text": "abc", "tags": ["x", "y"]}]]]
    t.state["box"] = {"a": 1}
    t.state["box"]["b"] = 2
    assert r.sync() == [["s", ["box"], {"a": 1, "b": 2}]]


def test_parent_write_kills_child_ops_and_child_after_parent_survives() -> None:
    t, r = tracked({"p": {"c": "x", "d": 1}})
    t.state["p"]["c"] += "y"
    t.state["p"]["d"] = 2
    t.state["p"] = 5
    assert r.sync() == [["s", ["p"], 5]]
    t.state["p"] = {"c": ""}
    t.state["p"]["c"] += "z"
    assert r.sync() == [["s", ["p"], {"c": "z"}]]
    t.state["l"] = [1]
    t.state["l"].append(2)
    t.state["l"].clear()
    t.state["l"].append(3)
    assert r.sync() == [["s", ["l"], [3]]]


def test_pending_bound_collapses_to_one_r() -> None:
    t, r = tracked({f"k{i}": 0 for i in range(5000)})
    for i in range(4000):
        t.state[f"k{i}"] = 1
    batch = t.flush()
    assert len(batch) == 4000 and batch[0][0] == "s"
    r.value = apply(r.value, batch)
    for i in range(4096):
        t.state[f"k{i}"] = 2
    batch = t.flush()
    assert len(batch) == 1 and batch[0][0] == "r"
    assert apply(r.value, batch) == t.target


def test_rebase_discard_and_state_setter() -> None:
    t, r = tracked({"a": 1})
    t.state["a"] = 2
    t.rebase()
    assert r.sync() == [["r", {"a": 2}]]
    t.state["a"] = 3
    t.discard()
    assert not t.dirty
    assert t.flush() == []
    r.value = copy.deepcopy(t.target)  # the consumer got the change some other way
    t.state["b"] = 1
    t.state = {"fresh": True}
    assert r.sync() == [["r", {"fresh": True}]]
    fresh = track({"x": 1})
    fresh.discard()
    assert fresh.flush() == [["r", {"x": 1}]]  # the first flush stays a base batch


def test_scalar_root() -> None:
    t, r = tracked("abc")
    assert t.state == "abc"
    t.state += "d"
    assert r.sync() == [["r", "abcd"]]


# -- value checks -----------------------------------------------------------------------------------


class Thing:
    pass


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({1, 2}, "set {1, 2} is not a JSON value (use a list)"),
        ((1, 2), "tuple (1, 2) is not a JSON value (use a list)"),
        (b"x", "bytes b'x' is not a JSON value"),
        (datetime.date(2024, 1, 1), "date datetime.date(2024, 1, 1) is not a JSON value"),
        (decimal.Decimal("1.5"), "Decimal Decimal('1.5') is not a JSON value"),
        (float("nan"), "nan is not a finite number"),
        (float("inf"), "inf is not a finite number"),
        ({1: "x"}, "object key 1 is not a str"),
        (Thing(), "Thing <"),
    ],
)
def test_non_json_values_are_refused_with_the_path(value: Any, fragment: str) -> None:
    t, r = tracked({"a": {"b": [0]}})
    with pytest.raises(JSONValueError) as info:
        t.state["a"]["b"][0] = {"deep": [value]}
    assert fragment in str(info.value)
    assert "at path ['a', 'b', 0, 'deep', 0]" in str(info.value)
    assert isinstance(info.value, TypeError)
    assert t.target == {"a": {"b": [0]}}
    assert not t.dirty
    with pytest.raises(JSONValueError):
        t.state["a"]["b"].extend([1, {"x": value}])
    with pytest.raises(JSONValueError):
        t.state["a"].update(ok=1, bad=value)
    assert t.target == {"a": {"b": [0]}}
    assert r.sync() == []


def test_cycles_and_non_str_keys_are_refused() -> None:
    t = track({})
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(JSONValueError, match=f"nested deeper than {MAX_DEPTH} levels"):
        t.state["c"] = cyclic
    with pytest.raises(JSONValueError, match="object key 3 is not a str"):
        t.state[3] = 1  # type: ignore[index]
    assert t.target == {}


def test_reserved_segments_are_refused() -> None:
    t, r = tracked({"ok": {"__proto__": {"x": 1}}})
    for key in ("__proto__", "constructor", "prototype"):
        with pytest.raises(UnsafePathError) as info:
            t.state[key] = 1
        assert info.value.segment == key
        assert f"unsafe path segment: {key!r}" in str(info.value)
    with pytest.raises(UnsafePathError, match="in path \\['ok', '__proto__'\\]"):
        t.state["ok"]["__proto__"]["x"] = 2
    # As keys inside a written value they replicate fine.
    t.state["v"] = {"__proto__": 1}
    assert r.sync() == [["s", ["v"], {"__proto__": 1}]]
    # A diff that would need the reserved segment replaces the parent instead.
    t.state["ok"] = {"__proto__": {"x": 3}}
    assert r.sync() == [["s", ["ok"], {"__proto__": {"x": 3}}]]


# -- aliasing ----------------------------------------------------------------------------------------


def test_payloads_are_copied_both_ways() -> None:
    t, r = tracked({"l": []})
    entry = {"tags": ["a"]}
    t.state["l"].append(entry)
    t.state["e"] = entry
    entry["tags"].append("mutated")
    assert t.target == {"l": [{"tags": ["a"]}], "e": {"tags": ["a"]}}
    (splice,) = [op for op in r.sync() if op[0] == "p"]
    splice[4][0]["tags"].append("op-mutated")
    t.state["l"][0]["tags"].append("b")
    assert splice[4][0]["tags"] == ["a", "op-mutated"]
    assert t.target["l"][0]["tags"] == ["a", "b"]
    base = track({"x": [1]})
    op = base.flush()
    op[0][1]["x"].append(2)
    assert base.target == {"x": [1]}


def test_copy_and_slices() -> None:
    t = track({"l": [{"a": 1}, 2]})
    plain = t.state["l"].copy()
    plain[0]["a"] = 5
    assert t.target["l"][0] == {"a": 1}
    part = t.state["l"][0:1]
    assert isinstance(part, list) and isinstance(part[0], TrackedDict)
    part[0]["a"] = 7  # a slice shares its elements, as with a plain list
    assert t.target["l"][0] == {"a": 7}


# -- held references ----------------------------------------------------------------------------------


def test_held_rows_follow_reindexing() -> None:
    t, r = tracked({"rows": [{"n": i} for i in range(6)]})
    row = t.state["rows"][5]
    t.state["rows"].insert(0, {"n": -1})
    row["x"] = 1
    assert r.sync() == [["p", ["rows"], 0, 0, [{"n": -1}]], ["s", ["rows", 6, "x"], 1]]
    t.state["rows"].pop(0)
    t.state["rows"].pop(0)
    row["x"] = 2
    assert r.sync() == [["p", ["rows"], 0, 2, []], ["s", ["rows", 4, "x"], 2]]
    t.state["rows"].sort(key=lambda v: -v["n"])
    row["x"] = 3
    batch = r.sync()
    assert batch[-1] == ["s", ["rows", 0, "x"], 3]
    assert t.target["rows"][0] == {"n": 5, "x": 3}


def test_held_references_after_removal_or_replacement_raise_loudly() -> None:
    t, r = tracked({"rows": [{"n": 0}, {"n": 1}], "box": {"inner": {"v": 1}}})
    gone = t.state["rows"][0]
    t.state["rows"].pop(0)
    with pytest.raises(PathError, match="no longer part of the tracked value") as info:
        gone["n"] = 9
    assert "last at path ['rows', 0]" in str(info.value)
    assert gone["n"] == 0  # reading a detached container still works
    inner = t.state["box"]["inner"]
    t.state["box"] = 7
    with pytest.raises(PathError, match="no longer part of the tracked value"):
        inner["v"] = 2
    old_root = t.state
    t.state = {"new": 1}
    with pytest.raises(PathError):
        old_root["x"] = 1
    assert r.sync() == [["r", {"new": 1}]]


def test_same_kind_replacement_updates_in_place_and_handles_follow() -> None:
    t, r = tracked({"msg": {"text": "a", "n": 1}})
    held = t.state["msg"]
    t.state["msg"] = {"text": "ab", "n": 2}
    held["extra"] = True
    assert r.sync() == [
        ["a", ["msg", "text"], "b"],
        ["s", ["msg", "n"], 2],
        ["s", ["msg", "extra"], True],
    ]
    assert held is t.state["msg"]


# -- plain-container surface -------------------------------------------------------------------------


def test_proxies_read_like_plain_containers() -> None:
    value = {"s": "text", "n": 1.5, "l": [1, [2]], "d": {"k": None}}
    t = track(value)
    s = t.state
    assert isinstance(s, Mapping) and isinstance(s, MutableMapping)
    assert isinstance(s["l"], MutableSequence)
    assert not isinstance(s, dict)
    assert s == value and s["l"] == [1, [2]] and s["l"] != [1]
    assert s["s"] is t.target["s"]  # strings come back as themselves
    assert s["l"] is s["l"]  # one proxy per container
    assert list(s) == ["s", "n", "l", "d"] and len(s) == 4 and "n" in s
    assert s.get("missing") is None and s.get("d") == {"k": None}
    assert dict(s.items())["n"] == 1.5
    plain_list = [1, [2]]
    assert plain_list == s["l"]  # reflected: list.__eq__ defers to the proxy
    assert list(s["l"]) == plain_list and 1 in s["l"] and s["l"].index(1) == 0
    assert repr(s["d"]) == "{'k': None}"
    assert json.dumps(t.target) == json.dumps(value)
    assert orjson.loads(orjson.dumps(t.target)) == value
    assert copy.deepcopy(s) == value and isinstance(copy.deepcopy(s), dict)
    assert s | {"x": 1} == {**value, "x": 1}
    assert s["l"] + [3] == [1, [2], 3]
    assert isinstance(t.state["l"], TrackedList)
    with pytest.raises(TypeError):
        hash(s)
    with pytest.raises(AttributeError):
        s.fromkeys  # noqa: B018 - not a mutator we track: absent, not silently untracked


def test_state_must_be_assigned_through_the_property() -> None:
    t = track({})
    with pytest.raises(AttributeError):
        t.other = 1  # type: ignore[attr-defined]


def test_reads_and_flushes_touch_only_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolfold.chord import _tracker

    t = track({"rows": [{"n": i, "tags": [i]} for i in range(10_000)], "other": {"x": 1}})
    t.flush()
    rows = t.state["rows"]
    row = rows[5_000]
    assert row["n"] == 5_000
    assert len(rows._kids) == 1  # walking in created one proxy, copied nothing
    visited: list[Any] = []
    emit = _tracker._emit

    def counting(tr: Any, node: Any, path: list[Any], ops: list[Any]) -> None:
        visited.append(path)
        emit(tr, node, path, ops)

    monkeypatch.setattr(_tracker, "_emit", counting)
    row["tags"].append("x")
    rows.append({"n": -1})
    assert t.flush() == [
        ["p", ["rows"], 10_000, 0, [{"n": -1}]],
        ["p", ["rows", 5_000, "tags"], 1, 0, ["x"]],
    ]
    assert visited == [[], ["rows"], ["rows", 5_000], ["rows", 5_000, "tags"]]


def test_extended_slices_and_negative_indices() -> None:
    t, r = tracked({"l": [0, 1, 2, 3, 4, 5]})
    log = t.state["l"]
    log[::2] = ["a", "b", "c"]
    assert r.sync() == [["s", ["l", 0], "a"], ["s", ["l", 2], "b"], ["s", ["l", 4], "c"]]
    del log[::-2]
    assert t.target["l"] == ["a", "b", "c"]
    r.sync()
    log[-1] = "z"
    log.insert(-1, "y")
    assert r.sync() == [["p", ["l"], 2, 0, ["y"]], ["s", ["l", 3], "z"]]
    with pytest.raises(ValueError, match="extended slice of size 2"):
        log[::2] = [1]
    with pytest.raises(IndexError):
        log[-9] = 1
    assert t.target["l"] == ["a", "b", "y", "z"]
    assert r.sync() == []
