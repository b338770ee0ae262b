"""The reference tracker scripts (scripts.jsonl) replayed on our tracker, in JavaScript semantics.

Every script must reach the same final value; every flushed batch must encode, decode and
apply (one encoder/decoder per stream, a replica started from nothing) to exactly the
tracker's value at that point, and a fresh decoder started at any base batch must too. A
script the reference refuses must fail at the same step with a ChordError (or a
TypeError/ValueError). Op-for-op equality is not required; run this file as a script for the
op/wire byte totals next to the reference's.
"""

from __future__ import annotations

import json
import math
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from toolfold.chord import ChordError, Decoder, Encoder, Tracker, apply, is_base, track
from toolfold.chord._text import drop_utf16_prefix

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "chord"  # tests/vectors/chord
CASES = [json.loads(line) for line in (VECTORS / "scripts.jsonl").read_text().splitlines() if line]


# -- JavaScript semantics ---------------------------------------------------------------------------


def js_number(x: float | int) -> str:
    """``String(x)`` for a JavaScript number (Number::toString, radix 10)."""
    if isinstance(x, int):
        x = float(x) if abs(x) >= 10**21 else x
        if isinstance(x, int):
            return str(x)
    if x == 0:
        return "0"
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x < 0:
        return "-" + js_number(-x)
    # repr() gives the shortest round-tripping digits, as JavaScript does; only the layout
    # differs (JavaScript: plain notation for 1e-7 < x < 1e21, "1e-7"/"1.5e+21" otherwise).
    _sign, digit_tuple, exponent = Decimal(repr(x)).normalize().as_tuple()
    s = "".join(map(str, digit_tuple))
    n = len(s)
    k = n + int(exponent)  # the decimal point sits after k digits
    if n <= k <= 21:
        return s + "0" * (k - n)
    if 0 < k <= 21:
        return s[:k] + "." + s[k:]
    if -6 < k <= 0:
        return "0." + "0" * (-k) + s
    exp = k - 1
    sign = "+" if exp >= 0 else "-"
    mantissa = s if n == 1 else f"{s[0]}.{s[1:]}"
    return f"{mantissa}e{sign}{abs(exp)}"


def js_string(v: Any) -> str:
    """``String(v)`` for a JSON value as JavaScript would print it (default sort key)."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int | float):
        return js_number(v)
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        # Array.prototype.join: null/undefined elements print as "".
        return ",".join("" if x is None else js_string(x) for x in v)
    return "[object Object]"


def js_sort_key(v: Any) -> bytes:
    # JavaScript compares strings by UTF-16 code units; UTF-16-BE bytes order the same way.
    return js_string(v).encode("utf-16-be", "surrogatepass")


def plain(v: Any) -> Any:
    """A tracked value as plain JSON (proxies unwrapped via their plain copy)."""
    if hasattr(v, "copy") and not isinstance(v, dict | list | str):
        return v.copy()
    return v


def resolve(t: Tracker, path: list[Any]) -> Any:
    """The container at ``path``; what JavaScript would fail on is a TypeError here."""
    node = t.state
    for seg in path:
        if isinstance(node, str) or node is None or isinstance(node, int | float | bool):
            raise TypeError(f"cannot read {seg!r} of a scalar")
        try:
            if hasattr(node, "append"):
                if not isinstance(seg, int):
                    raise TypeError(f"list key {seg!r}")
                node = node[seg]
            else:
                node = node[seg if isinstance(seg, str) else str(seg)]
        except (KeyError, IndexError):
            # JavaScript reads `undefined`, and the next step into it is a TypeError.
            raise TypeError(f"cannot read {seg!r}: it does not exist") from None
    return node


def _has(parent: Any, key: Any) -> bool:
    if hasattr(parent, "append"):
        return isinstance(key, int) and 0 <= key < len(parent)
    return key in parent


def run_step(t: Tracker, step: dict[str, Any]) -> list[Any] | None:
    """Perform one script step; return the flushed batch for ``flush``."""
    do = step["do"]
    if do == "flush":
        return t.flush()
    if do == "rebase":
        t.rebase()
        return None
    if do == "discard":
        t.discard()
        return None
    if do == "replace":
        t.state = step["value"]
        return None
    path = step["path"]
    if do in ("set", "del", "str_append", "str_slide"):
        parent = resolve(t, path[:-1])
        key = path[-1]
        is_list = hasattr(parent, "append")
        if not is_list and isinstance(key, int):
            key = str(key)
        if do == "set":
            if is_list and key == len(parent):
                parent.append(step["value"])  # JS: arr[arr.length] = v appends
            else:
                parent[key] = step["value"]
        elif do == "del":
            if is_list:
                # JS `delete arr[i]` leaves a hole; the reference refuses it (Python's
                # `del l[i]` is a splice, a different operation, tested elsewhere).
                raise TypeError("delete would create a sparse array; use splice instead")
            if key in parent:
                del parent[key]
            elif key in ("__proto__", "constructor", "prototype"):
                del parent[key]  # let the tracker refuse the segment
        elif do == "str_append":
            # JavaScript `+=` concatenates the string form of whatever is there
            # (`undefined` for a missing key or index).
            if not _has(parent, key):
                old = "undefined"
            else:
                old = parent[key]
                if not isinstance(old, str):
                    old = js_string(plain(old))
            if is_list and key == len(parent):
                parent.append(old + step["text"])
            else:
                parent[key] = old + step["text"]
        else:
            old = parent[key]
            if not isinstance(old, str):
                raise TypeError(f"str_slide on a {type(old).__name__}")
            parent[key] = drop_utf16_prefix(old, step["drop"]) + step["text"]
        return None
    arr = resolve(t, path)
    if not hasattr(arr, "append"):
        raise TypeError(f"{do} on a non-array")
    if do == "push":
        arr.extend(step["items"])
    elif do == "pop":
        if len(arr):
            arr.pop()
    elif do == "shift":
        if len(arr):
            arr.pop(0)
    elif do == "unshift":
        arr[0:0] = step["items"]
    elif do == "splice":
        size = len(arr)
        index = int(step["index"])
        index = max(size + index, 0) if index < 0 else min(index, size)
        remove = max(0, min(int(step.get("remove", 0)), size - index))
        arr[index : index + remove] = step.get("items", [])
    elif do == "set_length":
        n = int(step["length"])
        if n < len(arr):
            del arr[n:]
        elif n > len(arr):
            arr.extend([None] * (n - len(arr)))
    elif do == "reverse":
        arr.reverse()
    elif do == "sort":
        arr.sort(key=lambda v: js_sort_key(plain(v)))
    else:
        raise AssertionError(f"unknown step {do!r}")
    return None


def normal(v: Any) -> Any:
    """JSON round trip: what a replica on the other side of the wire holds."""
    return json.loads(json.dumps(v))


class Run:
    """One script replayed: the batches, their wire form, and the error step if any."""

    def __init__(self, case: dict[str, Any]) -> None:
        req = case["request"]
        scan = (req.get("options") or {}).get("maxOverlapScan", 65536)
        self.tracker = track(req["initial"], max_overlap_scan=scan)
        self.batches: list[list[Any]] = []
        self.wire: list[list[Any]] = []
        self.error: BaseException | None = None
        self.error_step: int | None = None
        encoder, decoder = Encoder(), Decoder()
        replica: Any = None
        for n, step in enumerate(req["steps"]):
            try:
                batch = run_step(self.tracker, step)
            except (ChordError, TypeError, ValueError) as exc:
                self.error, self.error_step = exc, n
                break
            if batch is None:
                continue
            wire = encoder.encode(batch)
            self.batches.append(batch)
            self.wire.append(normal(wire))
            decoded = decoder.decode(normal(wire))
            replica = apply(replica, decoded)
            assert normal(replica) == normal(self.tracker.target), (
                f"replica diverged after flush at step {n}: batch {batch}"
            )


@pytest.mark.parametrize("case", CASES, ids=[f"{c['id']}-{c['kind']}" for c in CASES])
def test_script(case: dict[str, Any]) -> None:
    run = Run(case)
    response = case["response"]
    if response["ok"]:
        assert run.error is None, f"step {run.error_step} failed: {run.error!r}"
        assert normal(run.tracker.target) == normal(response["final"])
        # The reference batches replay to the same value (same script, same result).
        assert len(run.batches) == len(response["batches"])
    else:
        assert run.error is not None, "the reference refused this script; we accepted it"
        assert run.error_step == response["at_step"], (
            f"failed at step {run.error_step} ({run.error!r}), reference at {response['at_step']}"
        )
        ref_class = response["error"].split(":", 1)[0]
        if ref_class == "UnsafePathError":
            assert type(run.error).__name__ == "UnsafePathError"
    # Every base batch restarts a fresh decoder that reaches the tracker's value at the end.
    targets: list[Any] = []
    final = None
    for i in range(len(run.wire)):
        if not is_base(run.wire[i]):
            continue
        decoder = Decoder()
        replica: Any = None
        for wire in run.wire[i:]:
            replica = apply(replica, decoder.decode(wire))
        targets.append(normal(replica))
        final = normal(replica)
    assert targets, "the first flush must be a base batch"
    assert all(x == final for x in targets)


def test_first_flush_of_every_script_is_a_base() -> None:
    for case in CASES[:20]:
        run = Run(case)
        assert run.batches and is_base(run.batches[0])


def _size(v: Any) -> int:
    return len(json.dumps(v, ensure_ascii=False, separators=(",", ":")).encode())


def byte_totals() -> dict[str, int]:
    """Summed JSON bytes of our ops/wire and the reference's over the scripts that succeed."""
    totals = {"ops": 0, "wire": 0, "ref_ops": 0, "ref_wire": 0, "scripts": 0}
    for case in CASES:
        if not case["response"]["ok"]:
            continue
        run = Run(case)
        totals["scripts"] += 1
        totals["ops"] += sum(_size(b) for b in run.batches)
        totals["wire"] += sum(_size(b) for b in run.wire)
        totals["ref_ops"] += sum(_size(b) for b in case["response"]["batches"])
        totals["ref_wire"] += sum(_size(b) for b in case["response"]["wire"])
    return totals


def test_byte_totals_stay_near_the_reference() -> None:
    totals = byte_totals()
    print(f"\nscripts.jsonl byte totals: {totals}")
    # Different (correct) choices are allowed; a blow-up is not.
    assert totals["wire"] <= 1.25 * totals["ref_wire"]


if __name__ == "__main__":
    t = byte_totals()
    print("| | ops bytes | wire bytes |")
    print("| --- | ---: | ---: |")
    print(f"| reference (TypeScript) | {t['ref_ops']:,} | {t['ref_wire']:,} |")
    print(f"| toolfold | {t['ops']:,} | {t['wire']:,} |")
    print(
        f"| ratio | {t['ops'] / t['ref_ops']:.3f} | {t['wire'] / t['ref_wire']:.3f} |"
        f" ({t['scripts']} scripts)"
    )
    sys.exit(0)
