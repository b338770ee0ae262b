"""Tracker benchmarks: median µs per mutate+flush, cost vs value size, and side by side the
alternatives a Python user would pick: send a full JSON snapshot, or ``jsonpatch.make_patch``.

Run: ``.venv/bin/python benchmarks/bench_chord_tracker.py [--quick]``. Prints markdown tables.

Workloads (spec chord.md, "Performance"): a 200 KB assistant string appended 7-8 chars at a
time; a 50 KB rolling window ``text = text[32:] + chunk``; a transcript push of a small
``{"id", "text"}`` entry. Text is varied and every iteration writes a fresh string (a repeated
fixture would make the overlap probe give up and measure the fallback instead). The same
workloads at 500 KB show that the cost follows the change, not the value.

The snapshot column is the same mutation on a plain dict followed by ``json.dumps`` of the
whole value (what a producer without a tracker sends every time); it runs fewer iterations
(each one serialises the whole value) and measures only producing the bytes, not sending or
applying them.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from toolfold.chord import Encoder, track

QUICK = "--quick" in sys.argv
ITERATIONS = 300 if QUICK else 2000
WARMUP = 50 if QUICK else 300
SNAPSHOT_ITERATIONS = 50 if QUICK else 300

_rng = random.Random(7)
_WORDS = [
    "".join(_rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_rng.randint(1, 9)))
    for _ in range(5000)
]


def text(n: int) -> str:
    """``n`` characters of varied, word-like text (a fresh string every call)."""
    out: list[str] = []
    size = 0
    while size < n:
        w = _rng.choice(_WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)[:n]


def jsize(v: Any) -> int:
    return len(json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode())


def measure(setup: Callable[[], Callable[[], list[Any]]]) -> tuple[float, float, float]:
    """(median µs per call, mean op bytes, mean wire bytes) of the callable ``setup`` builds."""
    step = setup()
    enc = Encoder()
    for _ in range(WARMUP):
        enc.encode(step())
    times: list[float] = []
    op_bytes = wire_bytes = 0
    for _ in range(ITERATIONS):
        t0 = time.perf_counter_ns()
        ops = step()
        times.append((time.perf_counter_ns() - t0) / 1000)
        op_bytes += jsize(ops)
        wire_bytes += jsize(enc.encode(ops))
    return statistics.median(times), op_bytes / ITERATIONS, wire_bytes / ITERATIONS


def append_workload(size: int) -> Callable[[], Callable[[], list[Any]]]:
    def setup() -> Callable[[], list[Any]]:
        t = track({"content": [{"type": "text", "text": text(size)}]})
        t.flush()
        chunks = [text(_rng.randint(7, 8)) for _ in range(ITERATIONS + WARMUP + 1)]
        it = iter(chunks)
        part = t.state["content"][0]

        def step() -> list[Any]:
            part["text"] += next(it)
            return t.flush()

        ops = step()
        assert [op[0] for op in ops] == ["a"], ops
        return step

    return setup


def plain_baseline(kind: str, size: int, snapshot: bool = False) -> tuple[float, float]:
    """(median µs, mean bytes sent) of the same mutation on a plain dict: no tracker, no
    flush; with ``snapshot`` each mutation is followed by ``json.dumps`` of the whole value."""
    if kind == "append":
        d: Any = {"content": [{"type": "text", "text": text(size)}]}
        part = d["content"][0]
        chunks = iter([text(_rng.randint(7, 8)) for _ in range(ITERATIONS + WARMUP)])

        def step() -> None:
            part["text"] += next(chunks)
    elif kind == "rolling":
        d = {"text": text(size)}
        chunks = iter([text(32) for _ in range(ITERATIONS + WARMUP)])

        def step() -> None:
            d["text"] = d["text"][32:] + next(chunks)
    else:
        d = {"transcript": [{"id": i, "text": text(40)} for i in range(size)]}
        texts = iter([text(40) for _ in range(ITERATIONS + WARMUP)])
        log = d["transcript"]
        counter = iter(range(10**9))

        def step() -> None:
            log.append({"id": next(counter), "text": next(texts)})

    def dumped() -> int:
        step()
        return len(json.dumps(d, separators=(",", ":"), ensure_ascii=False).encode())

    run: Callable[[], Any] = dumped if snapshot else step
    iterations = SNAPSHOT_ITERATIONS if snapshot else ITERATIONS
    for _ in range(iterations // 10 if snapshot else WARMUP):
        run()
    times = []
    sent = 0
    for _ in range(iterations):
        t0 = time.perf_counter_ns()
        n = run()
        times.append((time.perf_counter_ns() - t0) / 1000)
        sent += n or 0
    return statistics.median(times), sent / iterations


def rolling_workload(size: int, scan: int = 65536) -> Callable[[], Callable[[], list[Any]]]:
    def setup() -> Callable[[], list[Any]]:
        t = track({"text": text(size)}, max_overlap_scan=scan)
        t.flush()
        chunks = [text(32) for _ in range(ITERATIONS + WARMUP + 1)]
        it = iter(chunks)
        state = t.state

        def step() -> list[Any]:
            state["text"] = state["text"][32:] + next(it)
            return t.flush()

        ops = step()
        assert [op[0] for op in ops] == ["t", "a"], ops
        return step

    return setup


def push_workload(prefill: int) -> Callable[[], Callable[[], list[Any]]]:
    def setup() -> Callable[[], list[Any]]:
        t = track({"transcript": [{"id": i, "text": text(40)} for i in range(prefill)]})
        t.flush()
        texts = [text(40) for _ in range(ITERATIONS + WARMUP + 1)]
        it = iter(texts)
        counter = iter(range(10**9))
        log = t.state["transcript"]

        def step() -> list[Any]:
            log.append({"id": next(counter), "text": next(it)})
            return t.flush()

        ops = step()
        assert [op[0] for op in ops] == ["p"], ops
        return step

    return setup


def jsonpatch_rows() -> list[str]:
    try:
        import jsonpatch  # type: ignore[import-untyped]
    except ImportError:
        return ["| (jsonpatch not installed) | | | | |"]
    rows = []
    reps = 30 if QUICK else 100

    # Rolling window, 50 KB.
    doc = {"text": text(50_000)}
    t = track(doc)
    t.flush()
    jp_t: list[float] = []
    ch_t: list[float] = []
    jp_b = ch_b = 0
    for _ in range(reps):
        chunk = text(32)
        old = {"text": t.target["text"]}
        new = {"text": old["text"][32:] + chunk}
        t0 = time.perf_counter_ns()
        patch = jsonpatch.make_patch(old, new)
        jp_t.append((time.perf_counter_ns() - t0) / 1000)
        jp_b += len(patch.to_string().encode())
        t0 = time.perf_counter_ns()
        t.state["text"] = t.state["text"][32:] + chunk
        ops = t.flush()
        ch_t.append((time.perf_counter_ns() - t0) / 1000)
        ch_b += jsize(ops)
    rows.append(_jp_row("50 KB rolling window (slide 32)", jp_t, ch_t, jp_b / reps, ch_b / reps))

    # Prepend into a 10k-element list.
    base = [{"id": i, "v": text(8)} for i in range(10_000)]
    t = track({"rows": base})
    t.flush()
    jp_t, ch_t = [], []
    jp_b = ch_b = 0
    prepend_reps = max(3, reps // 20)
    for n in range(prepend_reps):
        item = {"id": -n, "v": text(8)}
        old = {"rows": list(t.target["rows"])}
        new = {"rows": [item, *old["rows"]]}
        t0 = time.perf_counter_ns()
        patch = jsonpatch.make_patch(old, new)
        jp_t.append((time.perf_counter_ns() - t0) / 1000)
        jp_b += len(patch.to_string().encode())
    # The tracker side on its own (interleaving it with make_patch measures a cold cache).
    rows_proxy = t.state["rows"]
    for n in range(prepend_reps * 20):
        item = {"id": -n, "v": text(8)}
        t0 = time.perf_counter_ns()
        rows_proxy.insert(0, item)
        ops = t.flush()
        ch_t.append((time.perf_counter_ns() - t0) / 1000)
        ch_b += jsize(ops) / 20
    rows.append(
        _jp_row(
            "prepend into a 10k-element list",
            jp_t,
            ch_t,
            jp_b / prepend_reps,
            ch_b / prepend_reps,
        )
    )
    return rows


def _jp_row(name: str, jp_t: list[float], ch_t: list[float], jp_b: float, ch_b: float) -> str:
    jm, cm = statistics.median(jp_t), statistics.median(ch_t)
    return (
        f"| {name} | {jm:,.1f} µs / {jp_b:,.0f} B | {cm:,.1f} µs / {ch_b:,.0f} B | "
        f"{jm / cm:,.0f}x | {jp_b / ch_b:,.0f}x |"
    )


def main() -> None:
    print(f"iterations {ITERATIONS}, warm-up {WARMUP}, Python {sys.version.split()[0]}\n")
    print(
        "| workload | median µs (mutate+flush) | same mutation on a plain dict µs "
        "| op B | wire B | full snapshot µs (mutate+json.dumps) | snapshot B "
        "| snapshot / tracker time | snapshot / wire bytes |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = [
        ("200 KB string, append 7-8 chars", append_workload(200_000), "append", 200_000),
        ("500 KB string, append 7-8 chars", append_workload(500_000), "append", 500_000),
        ("50 KB rolling window, slide 32", rolling_workload(50_000), "rolling", 50_000),
        # An overlap longer than max_overlap_scan cannot be found (spec): a 500 KB window
        # needs a larger scan, else every flush is an `s` of the whole window.
        (
            "500 KB rolling window, slide 32 (scan 1M)",
            rolling_workload(500_000, 10**6),
            "rolling",
            500_000,
        ),
        ("transcript push {id, text} (empty list)", push_workload(0), "push", 0),
        ("transcript push {id, text} (10k entries)", push_workload(10_000), "push", 10_000),
    ]
    for name, setup, kind, size in rows:
        us, ob, wb = measure(setup)
        base, _ = plain_baseline(kind, size)
        snap_us, snap_b = plain_baseline(kind, size, snapshot=True)
        print(
            f"| {name} | {us:,.2f} | {base:,.2f} | {ob:,.0f} | {wb:,.0f} | {snap_us:,.1f} "
            f"| {snap_b:,.0f} | {snap_us / us:,.1f}x | {snap_b / wb:,.0f}x |"
        )
    print()
    print("| vs jsonpatch.make_patch | jsonpatch | chord tracker | time ratio | bytes ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for row in jsonpatch_rows():
        print(row)


if __name__ == "__main__":
    main()
