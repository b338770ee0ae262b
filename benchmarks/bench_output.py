"""Benchmarks for the ToolOutput sink and the harness.

1. The worked example: a 256 KB build log in a 50 KB tail window, published at the
   adaptive cadence. Wire bytes of the op stream (one Chord encoder, JSON) versus
   whole-snapshot updates at the same cadence (the old design's ``tool_update``).
   Run twice: in-process on a simulated clock (deterministic), and through the
   real ``bash`` tool (real process, real clock).
2. Sink overhead per ``write`` and per flush, side by side with the naive
   alternatives (re-truncating the whole text per write; serialising the whole
   state per update).

Run: ``.venv/bin/python benchmarks/bench_output.py`` (prints markdown tables).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from toolfold.chord import Encoder
from toolfold.execenv import AdaptivePublisher, LocalExecEnv
from toolfold.harness import EventBus, ToolContext, ToolUpdate, execute_tool_call
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.output._retention import tail_window
from toolfold.tools import BASH

LOG_BYTES = 256 * 1024


def build_lines() -> list[str]:
    """Varied build-log lines (~64 B each) totalling about LOG_BYTES."""
    lines, size, i = [], 0, 0
    while size < LOG_BYTES:
        line = f"[{i:05d}] cc -O2 -c src/module_{i * 7919 % 10007:05d}.c -o obj/{i % 97:02d}.o ok\n"
        lines.append(line)
        size += len(line)
        i += 1
    return lines


class SimClock:
    """Simulated time for the publisher: timers fire when the producer advances time."""

    def __init__(self) -> None:
        self.t = 0.0
        self.timers: list[tuple[float, Callable[[], None], list[bool]]] = []

    def now(self) -> float:
        return self.t

    def call_later(self, delay: float, cb: Callable[[], None]) -> Any:
        flag = [False]
        self.timers.append((self.t + delay, cb, flag))

        class H:
            def cancel(self) -> None:
                flag[0] = True

        return H()

    def advance_to(self, t: float) -> None:
        while True:
            due = [x for x in self.timers if x[0] <= t]
            if not due:
                break
            first = min(due, key=lambda x: x[0])
            self.timers.remove(first)
            self.t = first[0]
            if not first[2][0]:
                first[1]()
        self.t = t


def worked_example_simulated(seconds: float) -> dict[str, float]:
    """The log written evenly over ``seconds`` of simulated time."""
    lines = build_lines()
    out = ToolOutput(OutputPolicy(retain="tail", max_bytes=50 * 1024))
    stream = out.open_stream()
    enc = Encoder()
    clock = SimClock()
    stats = {"updates": 0, "op_bytes": 0, "snapshot_bytes": 0}

    def produce() -> tuple[list[Any], int] | None:
        ops = stream.take()
        return (ops, stream.last_take_bytes) if ops else None

    def consume(ops: list[Any]) -> None:
        stats["updates"] += 1
        stats["op_bytes"] += len(orjson.dumps(enc.encode(ops)))
        stats["snapshot_bytes"] += len(orjson.dumps(out.snapshot()))

    async def main() -> None:
        pub: AdaptivePublisher[list[Any]] = AdaptivePublisher(
            produce=produce, consume=consume, clock=clock
        )
        out.on_change(pub.mark_dirty)
        pub.mark_dirty()
        step = seconds / len(lines)
        for i, line in enumerate(lines):
            clock.advance_to((i + 1) * step)
            out.write(line)
        out.write("[Showing lines ... Full output: /spill/build.log]\n")
        out.settle()
        await pub.finish()

    asyncio.run(main())
    return stats


async def worked_example_bash(tmp: Path) -> dict[str, float]:
    """The same log printed by a real child over ~2.5 s, through the bash tool."""
    script = tmp / "build.py"
    script.write_text(
        "import sys, time\n"
        f"lines = {build_lines()!r}\n"
        "for i in range(0, len(lines), 40):\n"
        "    sys.stdout.write(''.join(lines[i:i+40])); sys.stdout.flush(); time.sleep(0.025)\n"
    )
    bus = EventBus()
    enc = Encoder()
    stats = {"updates": 0, "op_bytes": 0, "snapshot_bytes": 0}
    replica: Any = None
    from toolfold.chord import apply

    def listen(e: Any) -> None:
        nonlocal replica
        if isinstance(e, ToolUpdate):
            stats["updates"] += 1
            stats["op_bytes"] += len(orjson.dumps(enc.encode(e.ops)))
            replica = apply(replica, e.ops)
            stats["snapshot_bytes"] += len(orjson.dumps(replica))

    bus.add_listener(listen)
    ctx = ToolContext(env=LocalExecEnv(tmp / "spill"), cwd=tmp)
    await execute_tool_call(
        BASH,
        "c1",
        {"command": f"{sys.executable} {script}"},
        run_id="r",
        turn_id="t",
        bus=bus,
        context=ctx,
    )
    return stats


def per_call(fn: Callable[[], None], n: int, repeat: int = 5) -> float:
    """Median microseconds per call of ``fn`` over ``repeat`` runs of ``n`` calls."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(runs)


def overheads() -> list[tuple[str, float, str, float]]:
    lines = build_lines()
    n = len(lines)
    rows = []

    # write(): sink (windowed lazily) vs naive re-truncation of the whole text per write.
    def sink_writes(policy: OutputPolicy) -> Callable[[], None]:
        state = {"out": ToolOutput(policy), "i": 0}

        def step() -> None:
            i = state["i"]
            if i == n:
                state["out"], i = ToolOutput(policy), 0
            state["out"].write(lines[i])  # type: ignore[attr-defined]
            state["i"] = i + 1

        return step

    naive = {"text": "", "i": 0}

    def naive_write() -> None:
        i = naive["i"] % n
        text, _ = tail_window(str(naive["text"]) + lines[i], 50 * 1024, 2000)
        naive["text"], naive["i"] = text, i + 1

    tail = per_call(sink_writes(OutputPolicy(retain="tail")), n)
    rows.append(
        (
            "`write` 64 B line, tail 50 KB (sink)",
            tail,
            "naive `text += line` + re-truncate",
            per_call(naive_write, n // 4),
        )
    )
    head = per_call(sink_writes(OutputPolicy(retain="head")), n)
    rows.append(("`write` 64 B line, head 50 KB (sink)", head, "same, naive", rows[0][3]))

    # flush: after 32 line writes into a full 50 KB window, time only the flush —
    # take() (window materialised, tracker flushed, ops fanned out) vs serialising
    # the whole state (what a whole-value update costs on top of the same writes).
    out = ToolOutput(OutputPolicy(retain="tail"))
    stream = out.open_stream()
    for line in lines:
        out.write(line)
    stream.take()
    take_us, snap_us = [], []
    for k in range(600):
        for j in range(32):
            out.write(lines[(k * 32 + j) % n])
        t0 = time.perf_counter()
        stream.take()
        t1 = time.perf_counter()
        orjson.dumps(out._current_target())  # the old design's per-update serialisation only
        t2 = time.perf_counter()
        take_us.append((t1 - t0) * 1e6)
        snap_us.append((t2 - t1) * 1e6)
    rows.append(
        (
            "flush: `take()` after 32 writes, full window",
            statistics.median(take_us),
            "JSON of the whole state (serialisation alone)",
            statistics.median(snap_us),
        )
    )

    # details: one counter increment + take, vs re-serialising a details object of 200 entries.
    out2 = ToolOutput()
    s2 = out2.open_stream()
    out2.details.update({"passed": 0, "items": [{"name": f"t{i}", "ok": True} for i in range(200)]})
    s2.take()

    def detail_op() -> None:
        out2.details["passed"] += 1
        s2.take()

    def detail_snapshot() -> None:
        out2.details["passed"] += 1
        orjson.dumps(out2._current_target())

    rows.append(
        (
            "`details[k] += 1` + `take()` (200-entry details)",
            per_call(detail_op, 3000),
            "`details[k] += 1` + JSON of the whole state",
            per_call(detail_snapshot, 3000),
        )
    )
    return rows


def main() -> None:
    print("## ToolOutput sink and harness\n")
    print(
        f"Worked example: {LOG_BYTES // 1024} KB build log, 50 KB tail window, adaptive publisher "
        "(100 ms / 100 KiB/s). Op bytes = JSON of the Chord-encoded batches (one encoder); "
        "snapshot bytes = JSON of the whole state at each of the same updates.\n"
    )
    print("| run | updates | op stream bytes | whole-snapshot bytes | ratio |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for seconds in (1.0, 5.0):
        s = worked_example_simulated(seconds)
        print(
            f"| simulated, log over {seconds:g} s | {s['updates']} | {s['op_bytes']:,} | "
            f"{s['snapshot_bytes']:,} | {s['snapshot_bytes'] / s['op_bytes']:.1f}x smaller |"
        )
    with tempfile.TemporaryDirectory() as d:
        s = asyncio.run(worked_example_bash(Path(d)))
    print(
        f"| real `bash` tool, ~2.5 s child | {s['updates']} | {s['op_bytes']:,} | "
        f"{s['snapshot_bytes']:,} | {s['snapshot_bytes'] / s['op_bytes']:.1f}x smaller |"
    )
    print("\nSink overhead (median µs per operation; side by side in one run):\n")
    print("| sink | µs | alternative | µs | alternative ÷ sink |")
    print("| --- | ---: | --- | ---: | ---: |")
    for name, ours, alt_name, alt in overheads():
        print(f"| {name} | {ours:.2f} | {alt_name} | {alt:.2f} | {alt / ours:.1f}x |")


if __name__ == "__main__":
    main()
