"""Property tests for Chord: codec round trips, fresh decoders at bases, and hostile wire input."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.chord import ChordError, Decoder, Encoder, apply, is_base

# -- values and ops ---------------------------------------------------------------------------

KEYS = st.sampled_from(["a", "b", "text", "0", "k é", "😀", "log"])
TEXT = st.text(max_size=12) | st.sampled_from(["😀", "🧑\u200d💻", "🇯🇵", "e\u0301", "a😀b"])
SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    TEXT,
    st.floats(allow_nan=False, allow_infinity=False, width=32),
)
VALUES = st.recursive(
    SCALARS,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(KEYS, kids, max_size=4),
    max_leaves=4,
)
# The codec never looks inside payloads: cheap ones keep the round-trip test fast.
PAYLOADS = SCALARS | st.lists(SCALARS, max_size=2) | st.dictionaries(KEYS, SCALARS, max_size=2)
SEGMENTS = KEYS | st.integers(0, 4)
PATHS = st.lists(SEGMENTS, min_size=1, max_size=3)
INDEX = st.integers(0, 6) | st.sampled_from([1.0, 3.0])


@st.composite
def any_op(draw: st.DrawFn) -> list[Any]:
    """A valid op (not necessarily applicable): for codec round trips."""
    verb = draw(st.sampled_from("sdatpmr" + "sap" * 3))
    path = draw(PATHS)
    if verb == "r":
        return ["r", draw(PAYLOADS)]
    if verb == "s":
        return ["s", path, draw(PAYLOADS)]
    if verb == "d":
        return ["d", path]
    if verb == "a":
        return ["a", path, draw(TEXT)]
    if verb == "t":
        return ["t", path, draw(INDEX)]
    if verb == "p":
        root = draw(st.sampled_from([path, []]))
        return ["p", root, draw(INDEX), draw(INDEX), draw(st.lists(PAYLOADS, max_size=3))]
    n = draw(st.integers(0, 4))
    return ["m", path, draw(st.permutations(list(range(n))))]


BATCHES = st.lists(st.lists(any_op(), max_size=6), min_size=1, max_size=4)


def _integer_fields(op: list[Any]) -> list[Any]:
    fields: list[Any] = [] if op[0] == "r" else list(op[1])
    if op[0] == "t":
        fields.append(op[2])
    elif op[0] == "p":
        fields += op[2:4]
    elif op[0] == "m":
        fields += op[2]
    return [f for f in fields if type(f) is not str]


@settings(max_examples=600)
@given(BATCHES)
def test_encode_then_decode_gives_the_same_ops(batches: list[list[list[Any]]]) -> None:
    encoder, decoder = Encoder(), Decoder()
    for batch in batches:
        wire = encoder.encode(batch)
        assert is_base(wire) == is_base(batch)
        decoded = decoder.decode(json.loads(json.dumps(wire)))
        assert decoded == batch
        for got in decoded:
            # Whole floats (1.0) in integer fields come out as int, as JavaScript prints them.
            assert all(type(f) is int for f in _integer_fields(got))


# -- applicable streams ---------------------------------------------------------------------------


def _nodes(value: Any) -> list[tuple[list[Any], Any]]:
    out: list[tuple[list[Any], Any]] = []
    stack: list[tuple[list[Any], Any]] = [([], value)]
    while stack and len(out) < 60:
        path, node = stack.pop()
        out.append((path, node))
        if type(node) is dict:
            stack.extend(([*path, k], v) for k, v in node.items())
        elif type(node) is list:
            stack.extend(([*path, i], v) for i, v in enumerate(node))
    return out


@st.composite
def applicable_batch(draw: st.DrawFn, state: Any) -> list[list[Any]]:
    """A batch of ops that applies to ``state`` (drawn against a scratch copy)."""
    scratch = copy.deepcopy(state)
    ops: list[list[Any]] = []
    for _ in range(draw(st.integers(0, 5))):
        if scratch is None or draw(st.integers(0, 30)) == 0:
            op: list[Any] = ["r", draw(st.dictionaries(KEYS, VALUES, max_size=3))]
        else:
            path, node = draw(st.sampled_from(_nodes(scratch)))
            if type(node) is dict:
                choice = draw(st.sampled_from(["set", "set", "del"]))
                key = draw(KEYS | st.sampled_from(sorted(node) or ["a"]))
                op = ["s", [*path, key], draw(VALUES)] if choice == "set" else ["d", [*path, key]]
            elif type(node) is list:
                n = len(node)
                choice = draw(st.sampled_from(["p", "p", "s", "d", "m"]))
                if choice == "p":
                    op = ["p", path, draw(st.integers(0, n + 1)), draw(st.integers(0, 3))]
                    op.append(draw(st.lists(VALUES, max_size=3)))
                elif choice == "s":
                    op = ["s", [*path, draw(st.integers(0, n))], draw(VALUES)]
                elif choice == "d" and n:
                    op = ["d", [*path, draw(st.integers(0, n - 1))]]
                else:
                    op = ["m", path, draw(st.permutations(list(range(n))))]
                if not path and op[0] in "sd":
                    continue
            elif type(node) is str and path:
                if draw(st.booleans()):
                    op = ["a", path, draw(TEXT)]
                else:
                    op = ["t", path, draw(st.integers(0, len(node) * 2 + 1))]
            else:
                continue
        scratch = apply(scratch, [op])
        ops.append(op)
    return ops


@st.composite
def stream(draw: st.DrawFn) -> tuple[list[list[list[Any]]], list[Any]]:
    """Batches (the first a base), and the value after each."""
    state: Any = None
    batches: list[list[list[Any]]] = []
    values: list[Any] = []
    for i in range(draw(st.integers(1, 5))):
        head: list[list[Any]] = []
        if i == 0 or (draw(st.integers(0, 5)) == 0):
            head = [["r", draw(st.dictionaries(KEYS, VALUES, max_size=3))]]
            state = apply(state, head)
        batch = head + draw(applicable_batch(state))
        state = apply(state, batch[len(head) :])
        batches.append(batch)
        values.append(copy.deepcopy(state))
    return batches, values


def _model_apply(value: Any, batch: list[list[Any]]) -> Any:
    """A deliberately naive applier (deep copy, Python semantics) to cross-check ``apply``."""
    value = copy.deepcopy(value)
    for op in batch:
        if op[0] == "r":
            value = copy.deepcopy(op[1])
            continue
        *parents, last = op[1] if op[0] in "sdat" else [*op[1], None]
        node = value
        for seg in parents:
            node = node[seg]
        if op[0] == "s":
            if type(node) is list and last == len(node):
                node.append(copy.deepcopy(op[2]))
            else:
                node[last] = copy.deepcopy(op[2])
        elif op[0] == "d":
            if type(node) is list or last in node:
                del node[last]
        elif op[0] == "a":
            node[last] += op[2]
        elif op[0] == "t":
            units = node[last].encode("utf-16-le", "surrogatepass")[2 * op[2] :]
            node[last] = units.decode("utf-16-le", "surrogatepass")
        elif op[0] == "p":
            node[op[2] : op[2] + op[3]] = copy.deepcopy(op[4])
        else:
            node[:] = [node[i] for i in op[2]]
    return value


@settings(max_examples=300)
@given(stream())
def test_a_fresh_decoder_from_any_base_batch_reaches_the_same_value_as_a_model(
    data: tuple[list[list[list[Any]]], list[Any]],
) -> None:
    batches, values = data
    model: Any = None
    for batch, value in zip(batches, values, strict=True):
        model = _model_apply(model, batch)
        assert model == value, "apply disagrees with the naive model"
    encoder = Encoder()
    wire = [json.loads(json.dumps(encoder.encode(b))) for b in batches]
    for start, first in enumerate(wire):
        if not is_base(first):
            continue
        decoder, replica = Decoder(), None
        for index in range(start, len(wire)):
            replica = apply(replica, decoder.decode(wire[index]))
            assert replica == values[index]


# -- hostile wire ----------------------------------------------------------------------------------

_deep: Any = 0
for _ in range(400):
    _deep = [_deep]

GARBAGE = st.sampled_from(
    [
        None,
        True,
        False,
        -1,
        0,
        1,
        2,
        1.5,
        2.0,
        -0.0,
        10**20,
        1e300,
        float("nan"),
        float("inf"),
        "",
        "x",
        "__proto__",
        "constructor",
        "#",
        "r",
        [],
        [0],
        [-1],
        ["__proto__"],
        ["a", "prototype"],
        [10**12],
        ["a", None],
        [[]],
        {"a": 1},
        {"__proto__": {}},
        _deep,
        [1, 0],
        [0, 0],
        list(range(5)),
    ]
)
VERBS = st.sampled_from([*"rsdatpm#", "x", "R", "", "ss"])


@st.composite
def mutated(draw: st.DrawFn, batch: list[Any]) -> Any:
    batch = copy.deepcopy(batch)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            return draw(GARBAGE)  # not a batch at all
        if not batch or kind == 1:
            batch.insert(draw(st.integers(0, len(batch))), [draw(VERBS), draw(GARBAGE)])
            continue
        i = draw(st.integers(0, len(batch) - 1))
        op = batch[i]
        if type(op) is not list or not op:
            batch[i] = [draw(VERBS), *draw(st.lists(GARBAGE, max_size=4))]
        elif kind == 2:
            op[0] = draw(VERBS)
        elif kind == 3:
            op[draw(st.integers(0, len(op) - 1))] = draw(GARBAGE)
        elif kind == 4:
            del op[draw(st.integers(0, len(op) - 1))]
        elif kind == 5:
            op.append(draw(GARBAGE))
        elif kind == 6 and len(op) > 1:
            op[1] = draw(st.integers(0, 4) | st.just(10**30))
        elif kind == 7:
            batch.insert(i, ["#", draw(st.integers(0, 4) | GARBAGE), draw(PATHS | GARBAGE)])
        elif kind == 8:
            batch[i] = draw(GARBAGE)
        else:
            j = draw(st.integers(0, len(batch) - 1))
            batch[i], batch[j] = batch[j], batch[i]
    return batch


@settings(max_examples=600)
@given(st.data())
def test_hostile_wire_only_raises_chord_errors_and_never_corrupts(data: st.DataObject) -> None:
    batches, _ = data.draw(stream())
    encoder = Encoder()
    wire = [encoder.encode(b) for b in batches]
    decoder = Decoder()
    replica: Any = None
    for batch in wire:
        if data.draw(st.integers(0, 2)) == 0:
            batch = data.draw(mutated(batch))
        before = copy.deepcopy(replica)
        table = dict(decoder._paths)
        try:
            ops = decoder.decode(batch)
        except ChordError:
            assert decoder._paths == table, "a failed decode must not touch the id table"
            continue
        try:
            replica = apply(replica, ops)
        except ChordError:
            assert replica == before, "a failed batch must leave the replica unchanged"
    # Both stay usable: a base batch through the same decoder brings the replica back.
    final = {"ok": ["😀", {"n": 1}]}
    recovery = Encoder().encode([["r", final], ["a", ["ok", 0], "!"]])
    assert apply(replica, decoder.decode(recovery)) == {"ok": ["😀!", {"n": 1}]}


@settings(max_examples=500)
@given(st.lists(st.lists(st.lists(GARBAGE | VERBS | PATHS, max_size=6), max_size=5), max_size=4))
def test_random_wire_only_raises_chord_errors(batches: list[Any]) -> None:
    decoder = Decoder()
    replica: Any = {"a": ["x", {"b": "y"}], "0": "z"}
    for batch in batches:
        before = copy.deepcopy(replica)
        try:
            replica = apply(replica, decoder.decode(batch))
        except ChordError:
            assert replica == before


# -- rollback -------------------------------------------------------------------------------------


@st.composite
def same_slot_ops(draw: st.DrawFn, state: dict[str, Any]) -> list[list[Any]]:
    """Ops that hit the same few slots again and again, so a rollback that restores them in the
    wrong order leaves a value that differs from the original."""
    key = draw(KEYS)
    ops: list[list[Any]] = []
    current = copy.deepcopy(state)
    for _ in range(draw(st.integers(2, 6))):
        node = current.get(key)
        kind = draw(st.sampled_from(["s", "s", "d", "a", "t", "p", "m"]))
        if kind == "a" and type(node) is str:
            op: list[Any] = ["a", [key], draw(TEXT)]
        elif kind == "t" and type(node) is str:
            op = ["t", [key], draw(st.integers(0, len(node) + 1))]
        elif kind == "p" and type(node) is list:
            op = ["p", [key], draw(st.integers(0, len(node))), draw(st.integers(0, 2))]
            op.append(draw(st.lists(VALUES, max_size=2)))
        elif kind == "m" and type(node) is list:
            op = ["m", [key], draw(st.permutations(list(range(len(node)))))]
        elif kind == "d":
            op = ["d", [key]]
        else:
            op = ["s", [key], draw(VALUES | TEXT | st.lists(VALUES, max_size=3))]
        current = apply(current, [op])
        ops.append(op)
    return ops


FAILING_OPS = st.sampled_from(
    [
        ["s", ["no such parent", "x"], 1],  # the parent is missing
        ["a", ["no such string"], "x"],  # append to nothing
        ["d", ["no such parent", 0]],
        ["p", ["no such list"], 0, 0, [1]],
    ]
)


@settings(max_examples=500)
@given(st.data())
def test_a_batch_that_fails_late_leaves_the_replica_exactly_as_it_was(data: st.DataObject) -> None:
    """Earlier ops of the batch touched the same slots several times before a later op failed:
    the rollback must undo them newest first, whatever they were."""
    state = data.draw(st.dictionaries(KEYS, VALUES | TEXT, max_size=4))
    ops = data.draw(same_slot_ops(state)) + data.draw(applicable_batch(copy.deepcopy(state)))
    ops = ops[: data.draw(st.integers(1, len(ops)))]
    failing = data.draw(FAILING_OPS)
    batch = [*ops, failing]
    replica = copy.deepcopy(state)
    with pytest.raises(ChordError):
        apply(replica, batch)
    assert replica == state, "a failed batch must leave the replica unchanged"

    # Through the codec: a batch that decodes but fails to apply leaves the replica as it was,
    # and one whose last op is malformed fails to decode without touching the path-id table
    # (ids defined by its earlier ops are not kept).
    encoder, decoder = Encoder(), Decoder()
    remote: Any = apply(None, decoder.decode(encoder.encode([["r", state]])))
    with pytest.raises(ChordError):
        apply(remote, decoder.decode(encoder.encode(batch)))
    assert remote == state
    table = dict(decoder._paths)
    wire = [*Encoder().encode(ops), ["x", 0]]
    with pytest.raises(ChordError):
        decoder.decode(wire)
    assert decoder._paths == table
