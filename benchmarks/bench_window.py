"""Tail windows of any size: bytes and time per flush, and CPU against whole snapshots.

Run: .venv/bin/python benchmarks/bench_window.py [--src DIR]

1. **By window size** (50 KB, 500 KB, 5 MB): a ``ToolOutput`` whose tail window is
   full of 64-byte lines gets 32 more lines, then one ``take()``; the encoded batch
   size and the median ``take()`` time over 200 rounds. The same for
   ``retain="head_tail"`` (a full head, a rolling tail and the cut marker between),
   next to what one flush costs when that view is one string (an ``s`` of the whole
   text: Chord has no op that cuts the middle of a string).
2. **CPU at a publish every ~4 KB** (50 KB window, 4 MB of 64-byte lines): toolfold's
   producer (``write`` per line, ``take`` + wire encode + JSON every 64 lines) plus
   its consumer (JSON parse, decode, ``apply``), against the design a user would
   otherwise pick: at every publish, the whole window as JSON, which the consumer
   parses. Two ways to keep that window: (a) keep the text and cut it with the same
   rule at each publish (``tail_window``); (b) the leaner one a user writes for line
   output: a deque of lines with their UTF-8 sizes, popped from the left while over
   the cap (exact for line-shaped writes). All use orjson. CPU is
   ``time.process_time`` of the whole loop; the designs run interleaved, best of 5.

``--src DIR`` imports toolfold from another source tree (to measure an older
version side by side: ``git archive <commit> src | tar -x -C /tmp/old`` then
``--src /tmp/old/src``).

Not measured: the adaptive publisher's pacing, the lane host and SSE framing
(``bench_replication.py``), storage (``bench_durability.py``), writes that are not
line-shaped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

LINE = "[00000] cc -O2 -c src/module_00000.c -o obj/00.o ... ok 漢字 😀\n"
LINE_BYTES = len(LINE.encode())
# Distinct lines (a numbered build log): identical lines would let a design that
# diffs old against new text see no change at all.
LINES = [LINE.replace("00000", f"{i:05d}", 2) for i in range(100_000)]
assert all(len(line.encode()) == LINE_BYTES for line in LINES)


def _load(src: Path) -> Any:
    sys.path.insert(0, str(src))
    import orjson

    from toolfold import chord, output
    from toolfold.output._retention import tail_window

    return orjson, chord, output, tail_window


def by_window(
    mods: Any, window: int, rounds: int = 200, retain: str = "tail"
) -> tuple[int, float, int]:
    """(median bytes per flush, median take() time, bytes of the whole text as one `s`)."""
    orjson, _chord, output, _ = mods
    policy = output.OutputPolicy(max_bytes=window, max_lines=10**7)
    if retain != "tail":
        policy = output.OutputPolicy(max_bytes=window, max_lines=10**7, retain=retain)
    out = output.ToolOutput(policy)
    stream = out.open_stream()
    fill = window // LINE_BYTES + 10
    out.write("".join(LINES[i % len(LINES)] for i in range(fill)))
    stream.take()
    sizes, times = [], []
    n = fill
    for _ in range(rounds):
        for _ in range(32):
            out.write(LINES[n % len(LINES)])
            n += 1
        t0 = time.perf_counter()
        ops = stream.take()
        times.append(time.perf_counter() - t0)
        sizes.append(len(orjson.dumps(ops)))
    whole = len(orjson.dumps([["s", ["content", 0, "text"], out.text]]))
    return int(statistics.median(sizes)), statistics.median(times), whole


def cpu_ops(mods: Any, total_lines: int, per_publish: int) -> tuple[float, int]:
    orjson, chord, output, _ = mods
    out = output.ToolOutput(output.OutputPolicy(max_bytes=50 * 1024, max_lines=10**7))
    stream = out.open_stream()
    encoder, decoder = chord.Encoder(), chord.Decoder()
    replica: Any = None
    sent = 0
    t0 = time.process_time()
    for i in range(total_lines):
        out.write(LINES[i % len(LINES)])
        if (i + 1) % per_publish == 0:
            wire = orjson.dumps(encoder.encode(stream.take()))
            sent += len(wire)
            replica = chord.apply(replica, decoder.decode(orjson.loads(wire)))
    elapsed = time.process_time() - t0
    assert replica["content"][0]["text"] == out.text
    return elapsed, sent


def cpu_snapshots(mods: Any, total_lines: int, per_publish: int) -> tuple[float, int]:
    orjson, _, _, tail_window = mods
    window, pending = "", []
    total_bytes = 0
    replica: Any = None
    sent = 0
    t0 = time.process_time()
    for i in range(total_lines):
        pending.append(LINES[i % len(LINES)])
        total_bytes += LINE_BYTES
        if (i + 1) % per_publish == 0:
            window, _ = tail_window(window + "".join(pending), 50 * 1024, 10**7)
            pending = []
            state = {
                "content": [{"type": "text", "text": window}],
                "details": {},
                "truncation": {"total_lines": i + 1, "total_bytes": total_bytes},
            }
            wire = orjson.dumps(state)
            sent += len(wire)
            replica = orjson.loads(wire)
    elapsed = time.process_time() - t0
    assert replica["content"][0]["text"] == window
    return elapsed, sent


def cpu_snapshot_lines(mods: Any, total_lines: int, per_publish: int) -> tuple[float, int]:
    orjson = mods[0]
    cap = 50 * 1024
    lines: deque[str] = deque()
    sizes: deque[int] = deque()
    held = total_bytes = 0
    replica: Any = None
    sent = 0
    t0 = time.process_time()
    for i in range(total_lines):
        line = LINES[i % len(LINES)]
        size = len(line.encode())
        lines.append(line)
        sizes.append(size)
        held += size
        total_bytes += size
        if (i + 1) % per_publish == 0:
            while held > cap:
                held -= sizes.popleft()
                lines.popleft()
            state = {
                "content": [{"type": "text", "text": "".join(lines)}],
                "details": {},
                "truncation": {"total_lines": i + 1, "total_bytes": total_bytes},
            }
            wire = orjson.dumps(state)
            sent += len(wire)
            replica = orjson.loads(wire)
    elapsed = time.process_time() - t0
    assert replica["content"][0]["text"] == "".join(lines)
    return elapsed, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    args = parser.parse_args()
    mods = _load(args.src)

    print("## Tail window by size: 32 lines of 64 bytes, then one take()\n")
    print("| window | bytes per flush | take() (median) |")
    print("|---:|---:|---:|")
    results = {}
    sizes = (("50 KB", 50 * 1024), ("500 KB", 500 * 1024), ("5 MB", 5 * 1024**2))
    for label, window in sizes:
        size, t, _ = by_window(mods, window)
        results[label] = t
        print(f"| {label} | {size:,} B | {t * 1e6:.0f} µs |")
    print(f"\ntake() at 5 MB / at 50 KB: {results['5 MB'] / results['50 KB']:.2f}x\n")

    try:
        mods[2].OutputPolicy(retain="head_tail")
    except Exception:  # an older tree without the mode (--src)
        pass
    else:
        print("## head_tail window by size: 32 lines of 64 bytes, then one take()\n")
        print("| window | bytes per flush | take() (median) | the view as one string (`s`) |")
        print("|---:|---:|---:|---:|")
        for label, window in sizes:
            size, t, whole = by_window(mods, window, retain="head_tail")
            results[label] = t
            print(
                f"| {label} | {size:,} B | {t * 1e6:.0f} µs | {whole:,} B ({whole / size:,.0f}x) |"
            )
        print(f"\ntake() at 5 MB / at 50 KB: {results['5 MB'] / results['50 KB']:.2f}x\n")

    total = 4 * 1024 * 1024 // LINE_BYTES
    per = 4096 // LINE_BYTES
    print(f"## CPU at a publish every ~4 KB (50 KB window, {total:,} lines of 64 B)\n")
    print("| design | producer + consumer CPU | bytes sent |")
    print("|---|---:|---:|")
    designs = {
        "toolfold ops (write, take, encode, JSON, decode, apply)": cpu_ops,
        "whole snapshots, text cut by tail_window each publish": cpu_snapshots,
        "whole snapshots, deque of lines popped to the cap": cpu_snapshot_lines,
    }
    best: dict[str, tuple[float, int]] = {}
    for _ in range(5):  # interleaved, so load on the shared machine hits every design
        for label, run in designs.items():
            got = run(mods, total, per)
            best[label] = min(best.get(label, got), got)
    ops = best[next(iter(designs))]
    for label, (cpu, sent) in best.items():
        print(f"| {label} | {cpu:.3f} s ({cpu / ops[0]:.2f}x ops) | {sent:,} |")
    for label, (cpu, sent) in list(best.items())[1:]:
        print(
            f"\nops CPU / ({label}): {ops[0] / cpu:.2f}x; bytes sent, snapshots / ops: "
            f"{sent / ops[1]:.1f}x"
        )


if __name__ == "__main__":
    main()
