"""Property tests of the tracker: random mutation programs against a plain-Python model.

Each example builds a nested value, runs random mutations through ``t.state`` (and through
proxies held across other mutations) and the same mutations on a plain deep copy, flushing
at random points. After every step the tracker's value equals the model; after every flush
the replica (``apply(replica, decoder.decode(encoder.encode(batch)))``) equals the tracker's
value; a fresh decoder started at any base batch reaches the final value; nothing the test
handed in or got out aliases the tracked value.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolfold.chord import (
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
    is_base,
    track,
)
from toolfold.chord._ops import lone_surrogate
from toolfold.chord._text import drop_utf16_prefix

CHARS = st.sampled_from([*"abcxyz -_\n", "é", "中", "😀", "🇯🇵", "𝄞", "👍🏽"])
TEXT = st.lists(CHARS, max_size=12).map("".join)
KEYS = st.sampled_from(["a", "b", "c", "text", "log", "0", "é", "😀k"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(KEYS, st.just("__proto__")), inner, max_size=4),
    ),
    max_leaves=12,
)
ROOTS = st.one_of(
    st.dictionaries(KEYS, VALUES, max_size=5),
    st.lists(VALUES, max_size=5),
)

SETTINGS = settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def normal(v: Any) -> Any:
    return json.loads(json.dumps(v))


def containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of every dict/list in ``value`` (root first)."""
    out = []
    if isinstance(value, dict):
        out.append(path)
        for k, v in value.items():
            out.extend(containers(v, (*path, k)))
    elif isinstance(value, list):
        out.append(path)
        for i, v in enumerate(value):
            out.extend(containers(v, (*path, i)))
    return out


def at(value: Any, path: tuple[Any, ...]) -> Any:
    for seg in path:
        value = value[seg]
    return value


def find(root: Any, obj: Any, path: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
    """Path of the container ``obj`` (by identity) inside ``root``."""
    if root is obj:
        return path
    if isinstance(root, dict):
        items: Any = root.items()
    elif isinstance(root, list):
        items = enumerate(root)
    else:
        return None
    for k, v in items:
        if isinstance(v, dict | list):
            found = find(v, obj, (*path, k))
            if found is not None:
                return found
    return None


Action = Callable[[Any], Any]


def dict_action(data: st.DataObject, d: dict[str, Any]) -> tuple[str, Action]:
    keys = list(d)
    existing = st.sampled_from(keys) if keys else KEYS
    kind = data.draw(
        st.sampled_from(
            [
                "set",
                "set",
                "str",
                "str",
                "derive",
                "del",
                "pop",
                "update",
                "setdefault",
                "popitem",
                "clear",
                "ior",
                "reserved",
            ]
        )
    )
    if kind == "set":
        k, v = data.draw(KEYS), data.draw(VALUES)
        return kind, lambda c: c.__setitem__(k, copy.deepcopy(v))
    if kind == "str":
        k = data.draw(existing)
        return kind, string_edit(data, k)
    if kind == "derive":
        # Assign a modified copy of the current value: the structural diff path.
        k = data.draw(existing)
        seed = data.draw(st.integers(0, 2**16))
        return kind, lambda c: c.__setitem__(k, derive(plain_of(c.get(k)), seed))
    if kind == "del":
        k = data.draw(existing)
        return kind, lambda c: c.__delitem__(k)
    if kind == "pop":
        k = data.draw(existing)
        return kind, lambda c: c.pop(k, None)
    if kind == "update":
        new = data.draw(st.dictionaries(KEYS, VALUES, max_size=3))
        return kind, lambda c: c.update(copy.deepcopy(new))
    if kind == "setdefault":
        k, v = data.draw(KEYS), data.draw(VALUES)
        return kind, lambda c: c.setdefault(k, copy.deepcopy(v))
    if kind == "popitem":
        return kind, lambda c: c.popitem()
    if kind == "clear":
        return kind, lambda c: c.clear()
    if kind == "ior":
        new = data.draw(st.dictionaries(KEYS, SCALARS, max_size=2))

        def ior(c: Any) -> None:
            c |= copy.deepcopy(new)

        return kind, ior
    if kind == "bad":
        return kind, bad_write(data, existing)
    reserved = data.draw(st.sampled_from(["__proto__", "constructor", "prototype"]))
    return kind, lambda c: c.__setitem__(reserved, 1)


def list_action(data: st.DataObject, xs: list[Any]) -> tuple[str, Action]:
    n = len(xs)
    index = st.integers(-n - 1, n + 1)
    kind = data.draw(
        st.sampled_from(
            [
                "append",
                "extend",
                "insert",
                "pop",
                "pop0",
                "del",
                "delslice",
                "setslice",
                "set",
                "str",
                "derive",
                "sort",
                "reverse",
                "clear",
                "remove",
                "iadd",
                "imul",
            ]
        )
    )
    if kind == "append":
        v = data.draw(VALUES)
        return kind, lambda c: c.append(copy.deepcopy(v))
    if kind == "extend":
        vs = data.draw(st.lists(VALUES, max_size=3))
        return kind, lambda c: c.extend(copy.deepcopy(vs))
    if kind == "insert":
        i, v = data.draw(index), data.draw(VALUES)
        return kind, lambda c: c.insert(i, copy.deepcopy(v))
    if kind == "pop":
        i = data.draw(index)
        return kind, lambda c: c.pop(i)
    if kind == "pop0":
        return kind, lambda c: c.pop(0)
    if kind == "del":
        i = data.draw(index)
        return kind, lambda c: c.__delitem__(i)
    if kind == "delslice":
        a, b = data.draw(index), data.draw(index)
        return kind, lambda c: c.__delitem__(slice(a, b))
    if kind == "setslice":
        a, b = data.draw(index), data.draw(index)
        vs = data.draw(st.lists(VALUES, max_size=3))
        return kind, lambda c: c.__setitem__(slice(a, b), copy.deepcopy(vs))
    if kind == "set":
        i, v = data.draw(index), data.draw(VALUES)
        return kind, lambda c: c.__setitem__(i, copy.deepcopy(v))
    if kind == "str":
        i = data.draw(st.integers(0, max(n - 1, 0)))
        return kind, string_edit(data, i)
    if kind == "derive":
        i = data.draw(st.integers(-max(n, 1), max(n - 1, 0)))
        seed = data.draw(st.integers(0, 2**16))
        return kind, lambda c: c.__setitem__(i, derive(plain_of(c[i]), seed))
    if kind == "sort":
        rev = data.draw(st.booleans())
        return kind, lambda c: c.sort(key=lambda v: json.dumps(plain_of(v)), reverse=rev)
    if kind == "reverse":
        return kind, lambda c: c.reverse()
    if kind == "clear":
        return kind, lambda c: c.clear()
    if kind == "remove":
        v = data.draw(st.sampled_from(xs) if xs else SCALARS)
        v = copy.deepcopy(v)
        return kind, lambda c: c.remove(v)
    if kind == "iadd":
        vs = data.draw(st.lists(VALUES, max_size=2))

        def iadd(c: Any) -> None:
            c += copy.deepcopy(vs)

        return kind, iadd
    if kind == "bad":
        return kind, bad_write(data, st.integers(0, max(n - 1, 0)))
    times = data.draw(st.integers(0, 2))

    def imul(c: Any) -> None:
        if isinstance(c, list):
            # Plain `*=` repeats references; the tracker repeats copies (a container sits in
            # a JSON value once). The model mirrors that.
            c[:] = [copy.deepcopy(x) for _ in range(times) for x in c]
        else:
            c *= times

    return kind, imul


BAD = st.sampled_from([set(), (1, 2), float("nan"), float("inf"), b"x", object(), {1: 2}])


def bad_write(data: st.DataObject, keys: st.SearchStrategy[Any]) -> Action:
    """Write a value with a non-JSON part, through one of the writing methods."""
    key = data.draw(keys)
    bad = data.draw(BAD)
    value = data.draw(st.sampled_from([bad, [1, bad], {"ok": 1, "x": {"y": bad}}]))
    how = data.draw(st.integers(0, 3))

    def write(c: Any) -> None:
        if isinstance(c, TrackedDict):
            if how == 0:
                c[key] = value
            elif how == 1:
                c.update({"fine": 1, "bad": value})
            else:
                c.setdefault("new-key", value)
        elif how == 0 and len(c):
            c[key % len(c)] = value
        elif how == 1:
            c.extend([1, value])
        elif how == 2:
            c.insert(0, value)
        else:
            c.append(value)

    return write


def string_edit(data: st.DataObject, key: Any) -> Action:
    how = data.draw(st.sampled_from(["append", "slide", "slide", "set", "cut"]))
    text = data.draw(TEXT)
    drop = data.draw(st.integers(0, 14))

    def edit(c: Any) -> None:
        old = c[key]
        if not isinstance(old, str):
            old = ""
        if how == "append":
            c[key] = old + text
        elif how == "slide":
            slid = drop_utf16_prefix(old, drop)
            if lone_surrogate(slid) is not None:
                # Never split an astral character: a lone surrogate is no storable value
                # (test_string_slots_replicate checks that the tracker refuses it).
                slid = slid[1:]
            c[key] = slid + text
        elif how == "cut":
            c[key] = old[: len(old) // 2]
        else:
            c[key] = text

    return edit


def plain_of(v: Any) -> Any:
    if isinstance(v, TrackedDict | TrackedList):
        return v.copy()
    return copy.deepcopy(v)


def derive(v: Any, seed: int) -> Any:
    """A slightly different copy of ``v`` (longer text, a changed key, an extra element)."""
    if isinstance(v, dict):
        out = {k: derive(x, seed // 3) if (seed + len(k)) % 3 == 0 else x for k, x in v.items()}
        if seed % 5 == 0:
            out[f"k{seed % 7}"] = seed
        if seed % 7 == 0 and out:
            out.pop(next(iter(out)))
        return out
    if isinstance(v, list):
        out_l = [derive(x, seed // 3) if (seed + i) % 3 == 0 else x for i, x in enumerate(v)]
        if seed % 4 == 0:
            out_l.insert(seed % (len(out_l) + 1), "new")
        if seed % 9 == 0 and out_l:
            out_l.pop(seed % len(out_l))
        return out_l
    if isinstance(v, str):
        return v + "+" if seed % 2 else v[1:] + "~"
    return {"was": v}


class Harness:
    """A tracker, its model and a replica stream."""

    def __init__(self, root: Any, scan: int) -> None:
        self.t: Tracker = track(root, max_overlap_scan=scan)
        self.model: Any = copy.deepcopy(root)
        self.enc, self.dec = Encoder(), Decoder()
        self.replica: Any = None
        self.wire: list[Any] = []
        self.emitted: list[tuple[list[Any], str]] = []
        self.held: list[Any] = []
        self.discarded_at = 0

    def flush(self) -> None:
        batch = self.t.flush()
        self.emitted.append((batch, json.dumps(batch)))
        wire = json.loads(json.dumps(self.enc.encode(batch)))
        self.wire.append(wire)
        self.replica = apply(self.replica, self.dec.decode(wire))
        assert normal(self.replica) == normal(self.t.target), batch

    def run(self, path: tuple[Any, ...], action: Action, kind: str, via: Any = None) -> None:
        """Run ``action`` on the container at ``path`` of both sides (or on a held proxy)."""
        target = via if via is not None else at(self.t.state, path)
        snapshot = copy.deepcopy(self.t.target)
        if kind == "bad":
            # A non-JSON value anywhere in what is written: refused, nothing changes.
            try:
                action(target)
            except JSONValueError as exc:
                assert "cannot write to the tracked value at path" in str(exc)
            else:
                raise AssertionError("a non-JSON value was accepted")
            assert self.t.target == snapshot
            return
        model_c = at(self.model, path)
        model_exc: BaseException | None = None
        try:
            action(model_c)
        except (IndexError, KeyError, ValueError, TypeError) as exc:
            model_exc = exc
        try:
            action(target)
        except UnsafePathError as exc:
            assert exc.segment in ("__proto__", "constructor", "prototype")
            assert self.t.target == snapshot  # refused: nothing recorded, nothing changed
            if model_exc is None:
                self.model = copy.deepcopy(snapshot)  # the model accepted what we refuse
            return
        except (IndexError, KeyError, ValueError, TypeError) as exc:
            assert model_exc is not None, f"{kind}: tracker raised {exc!r}, plain did not"
            assert isinstance(exc, (type(model_exc), ChordError)), (exc, model_exc)
            assert self.t.target == snapshot
            return
        assert model_exc is None, f"{kind}: plain raised {model_exc!r}, tracker did not"
        assert kind != "reserved"


@given(ROOTS, st.data(), st.sampled_from([65536, 65536, 8, 0]))
@SETTINGS
def test_random_programs_replicate(root: Any, data: st.DataObject, scan: int) -> None:
    h = Harness(root, scan)
    if data.draw(st.booleans()):
        h.flush()
    steps = data.draw(st.integers(1, 30))
    for _ in range(steps):
        choice = data.draw(st.integers(0, 19))
        if choice == 0:
            h.flush()
            continue
        if choice == 1:
            new = data.draw(ROOTS)
            h.t.state = copy.deepcopy(new)
            h.model = copy.deepcopy(new)
            continue
        if choice == 2:
            if data.draw(st.booleans()):
                h.t.rebase()
            elif h.replica is not None:
                # The consumer got the pending changes some other way.
                h.t.discard()
                h.replica = copy.deepcopy(h.t.target)
                h.discarded_at = len(h.wire)
            continue
        paths = containers(h.model)
        if not paths:
            continue
        path = data.draw(st.sampled_from(paths))
        container = at(h.model, path)
        if choice == 3:
            # Keep a proxy around; later steps write through it after other mutations.
            h.held.append(at(h.t.state, path))
            continue
        via = None
        if choice == 4 and h.held:
            via = data.draw(st.sampled_from(h.held))
            where = find(h.t.target, via._o)
            if where is None:
                # Detached: any write must be refused loudly, and change nothing.
                snapshot = copy.deepcopy(h.t.target)
                try:
                    if isinstance(via, TrackedDict):
                        via["a"] = 1
                    else:
                        via.append(1)
                except PathError as exc:
                    assert "no longer part of the tracked value" in str(exc)
                else:
                    raise AssertionError("a write through a detached proxy was accepted")
                assert h.t.target == snapshot
                continue
            path = where
            container = at(h.model, path)
        if isinstance(container, dict):
            kind, action = dict_action(data, container)
        else:
            kind, action = list_action(data, container)
        h.run(path, action, kind, via)
        assert normal(h.t.target) == normal(h.model), kind
        assert h.t.state == h.t.target
    h.flush()
    # Emitted batches never changed after the fact (no aliasing with the tracked value).
    for batch, text in h.emitted:
        assert json.dumps(batch) == text
    # A fresh decoder from any base batch reaches the same value.
    final = normal(h.t.target)
    for i, wire in enumerate(h.wire):
        if is_base(wire) and i >= h.discarded_at:
            dec = Decoder()
            replica: Any = None
            for w in h.wire[i:]:
                replica = apply(replica, dec.decode(w))
            assert normal(replica) == final


@given(st.lists(st.tuples(st.integers(0, 3), TEXT, st.integers(0, 20)), max_size=40), st.data())
@settings(max_examples=600, deadline=None)
def test_string_slots_replicate(edits: list[tuple[int, str, int]], data: st.DataObject) -> None:
    """Appends, slides (dropped in UTF-16 units, astral text included) and rewrites of one
    string, flushed at random points."""
    text = data.draw(TEXT)
    t = track({"s": text}, max_overlap_scan=data.draw(st.sampled_from([65536, 16, 3])))
    enc, dec = Encoder(), Decoder()
    replica = apply(None, dec.decode(enc.encode(t.flush())))
    for how, chunk, drop in edits:
        s = t.state["s"]
        if how == 0:
            t.state["s"] = s + chunk
        elif how == 1:
            slid = drop_utf16_prefix(s, drop) + chunk
            if lone_surrogate(slid) is not None:
                # The drop split an astral character: a lone surrogate is no storable value,
                # so the write is refused and the value stays as it was.
                with pytest.raises(JSONValueError, match="lone surrogate"):
                    t.state["s"] = slid
                assert t.state["s"] == s
            else:
                t.state["s"] = slid
        elif how == 2:
            t.state["s"] = chunk + s[drop:]
        else:
            t.state["s"] = s[: len(s) - drop]
        if data.draw(st.booleans()):
            batch = t.flush()
            assert all(op[0] in "atsd" for op in batch)
            replica = apply(replica, dec.decode(json.loads(json.dumps(enc.encode(batch)))))
            assert normal(replica) == normal(t.target)


@given(VALUES, st.data())
@settings(max_examples=300, deadline=None)
def test_written_values_are_copied(value: Any, data: st.DataObject) -> None:
    """Mutating a value after writing it (or an op after flushing it) changes nothing else."""
    t = track({"x": None, "l": []})
    t.flush()
    mine = copy.deepcopy(value)
    t.state["x"] = mine
    t.state["l"].append(mine)
    batch = t.flush()
    before = json.dumps(t.target)
    if isinstance(mine, dict):
        mine["zz"] = 1
    elif isinstance(mine, list):
        mine.append(1)
    for op in batch:
        payload = op[-1]
        if isinstance(payload, list):
            payload.append("mutated")
    assert json.dumps(t.target) == before
    # And a replica's payloads do not alias the producer's either.
    t.state["y"] = {"deep": [value]}
    snapshot = json.dumps(t.target)
    replica = apply(copy.deepcopy(t.target), t.flush())
    replica["y"]["deep"].append(2)
    assert json.dumps(t.target) == snapshot
