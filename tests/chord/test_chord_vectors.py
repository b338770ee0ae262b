"""The interoperability vectors recorded from the TypeScript Chord (tests/vectors/chord), one test per line."""

from __future__ import annotations

import copy
import json
from pathlib import Path
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
    validate_op,
    validate_wire_op,
)

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "chord"  # tests/vectors/chord

# The reference reports malformed tuples as JavaScript TypeErrors; here they are ShapeErrors.
CLASSES: dict[str, type[ChordError]] = {
    "TypeError": ShapeError,
    "PathError": PathError,
    "UnsafePathError": UnsafePathError,
}


def _cases(name: str) -> list[Any]:
    lines = (VECTORS / name).read_text(encoding="utf-8").splitlines()
    cases = [json.loads(line) for line in lines if line.strip()]
    return [pytest.param(case, id=f"{name.split('.')[0]}-{case['id']}") for case in cases]


def _expected_class(error: str) -> type[ChordError]:
    return CLASSES[error.split(":", 1)[0]]


def test_vectors_are_present() -> None:
    for name in ("encode.jsonl", "decode.jsonl", "edge_ok.jsonl", "malformed.jsonl"):
        assert len(_cases(name)) > 5, name


@pytest.mark.parametrize("case", _cases("encode.jsonl"))
def test_encode(case: dict[str, Any]) -> None:
    encoder = Encoder()
    wire = [encoder.encode(batch) for batch in case["request"]["batches"]]
    assert wire == case["response"]["wire"]
    # Byte-identical too: the wire text is json.dumps of the batch.
    assert [json.dumps(w) for w in wire] == [json.dumps(w) for w in case["response"]["wire"]]


def _decode_apply(case: dict[str, Any]) -> dict[str, Any]:
    """Run a decode_apply request; check on every failure that the replica is unchanged."""
    request = case["request"]
    decoder = Decoder()
    state = copy.deepcopy(request["base"])
    ops: list[Any] = []
    for index, batch in enumerate(request["batches"]):
        before = copy.deepcopy(state)
        try:
            decoded = decoder.decode(batch)
        except ChordError as exc:
            assert state == before
            return {"ok": False, "phase": "decode", "at_batch": index, "exc": exc, "state": state}
        try:
            state = apply(state, decoded)
        except ChordError as exc:
            assert state == before, "a failed batch must leave the replica unchanged"
            return {"ok": False, "phase": "apply", "at_batch": index, "exc": exc, "state": state}
        ops.append(decoded)
    return {"ok": True, "ops": ops, "state": state}


def _check(case: dict[str, Any]) -> None:
    expected = case["response"]
    got = _decode_apply(case)
    if expected["ok"]:
        assert got["ok"], f"unexpected {got.get('exc')!r}"
        assert got["ops"] == expected["ops"]
        assert got["state"] == expected["state"]
        assert json.dumps(got["state"], sort_keys=True) == json.dumps(
            expected["state"], sort_keys=True
        )
    else:
        assert not got["ok"], "expected a failure"
        assert (got["phase"], got["at_batch"]) == (expected["phase"], expected["at_batch"])
        assert type(got["exc"]) is _expected_class(expected["error"])


@pytest.mark.parametrize("case", _cases("decode.jsonl"))
def test_decode_apply(case: dict[str, Any]) -> None:
    _check(case)


@pytest.mark.parametrize("case", _cases("edge_ok.jsonl"))
def test_edge_cases_accepted(case: dict[str, Any]) -> None:
    assert case["response"]["ok"]
    _check(case)


@pytest.mark.parametrize("case", _cases("malformed.jsonl"))
def test_malformed(case: dict[str, Any]) -> None:
    _check(case)
    batches = case["request"]["batches"]
    for key, validator in (("validate_wire", validate_wire_op), ("validate", validate_op)):
        if key not in case:
            continue
        op = batches[0][0]
        outcome = case[key]
        if outcome["ok"]:
            validator(op)
        else:
            with pytest.raises(_expected_class(outcome["error"])):
                validator(op)


@pytest.mark.parametrize(
    "case", [c for c in _cases("decode.jsonl") if c.values[0]["response"]["ok"]]
)
def test_decoder_survives_a_failed_batch(case: dict[str, Any]) -> None:
    """After a batch fails, the same decoder and replica still take the rest of the stream
    once a base batch arrives (the decoder's tables are not poisoned)."""
    request = case["request"]
    decoder = Decoder()
    state = copy.deepcopy(request["base"])
    for batch in request["batches"]:
        # Noise before every batch: a forged short form, an undefined id and a bad verb.
        for noise in ([["a", "x"]], [["s", 9999, 1]], [["#", 0, ["__proto__"]]], [["zz"]]):
            with pytest.raises(ChordError):
                decoder.decode(noise)
        state = apply(state, decoder.decode(batch))
    assert state == case["response"]["state"]
