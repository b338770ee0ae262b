"""Replication benchmark: one lane, N subscribers — server CPU per batch, bytes, memory.

Run: .venv/bin/python benchmarks/bench_replication.py [--quick]

- In-process (N = 1, 10, 100, 1000): ``LaneHost.handle`` (reduce + tracker flush +
  encode + fan-out) per published batch, with subscribers that joined together
  (one shared stream) and with subscribers that joined at different moments
  (distinct streams, one encoder each); delivered bytes per subscriber vs
  sending the whole lane snapshot at the same cadence; memory per idle subscriber.
- Real HTTP on 127.0.0.1 (N = 1, 10, 100): a uvicorn server in a child process
  publishes the same stream to N SSE clients; its own CPU time per batch and the
  bytes each client received.

The workload is a bash-like tool call whose text is a rolling window of the last
1000 lines (~40 KB, emoji and CJK), 5 lines per update.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from toolfold.chord import utf16_len  # noqa: E402
from toolfold.harness._lane import (  # noqa: E402
    LaneHost,
    Lanes,
    LaneSubscription,
    new_lane_view,
    reduce_lane_snapshot,
)
from toolfold.harness.events import (  # noqa: E402
    HarnessEvent,
    RunEnd,
    RunStart,
    ToolEnd,
    ToolStart,
    ToolUpdate,
)

TEXT = ["content", 0, "text"]
WORDS = ["build", "ok", "😀", "漢字", "テスト", "🇯🇵", "naïve", "→", "中文输出", "warning:"]


def _line(i: int) -> str:
    return f"{i:06d} " + " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 2 + i % 7)) + "\n"


def workload(
    updates: int, window: int = 1000, per_update: int = 5, run: str = "run1"
) -> list[HarnessEvent]:
    """RunStart, ToolStart, a base whose window is already full, ``updates``
    sliding deltas (``t`` + ``a`` + totals), ToolEnd, RunEnd."""
    kept = [_line(i) for i in range(window)]
    state = {
        "content": [{"type": "text", "text": "".join(kept)}],
        "details": {},
        "terminate": False,
        "truncation": {"truncated": True, "total_lines": window, "output_lines": window},
    }
    events: list[HarnessEvent] = [
        RunStart(run, lane="bench"),
        ToolStart(run, "turn", "call", "bash", {"command": "make test"}),
        ToolUpdate(run, "turn", "call", [["r", state]]),
    ]
    for u in range(updates):
        first = window + u * per_update
        chunk = [_line(first + j) for j in range(per_update)]
        dropped = "".join(kept[:per_update])
        del kept[:per_update]
        kept.extend(chunk)
        ops: list[list[Any]] = [
            ["t", TEXT, utf16_len(dropped)],
            ["a", TEXT, "".join(chunk)],
            ["s", ["truncation", "total_lines"], first + per_update],
        ]
        events.append(ToolUpdate(run, "turn", "call", ops))
    events.append(ToolEnd(run, "turn", "call", is_error=False))
    events.append(RunEnd(run))
    return events


def _sse_len(batch_id: int, data: str) -> int:
    return len(f"id: {batch_id}\ndata: ".encode()) + len(data.encode()) + 2


def bench_in_process(n: int, updates: int, distinct: bool) -> dict[str, Any]:
    events = workload(updates)
    host = LaneHost("bench", buffer_batches=1 << 20, buffer_bytes=1 << 40)
    for event in events[:3]:  # RunStart, ToolStart, base
        host.handle(event)
    subs: list[LaneSubscription] = []
    if distinct:
        # Join at different moments (a small publish between joins): every
        # stream then has its own encoder and its own serialised batches.
        for k in range(n):
            subs.append(host.subscribe())
            host.handle(ToolUpdate("run1", "turn", "call", [["s", ["details", "joined"], k]]))
    else:
        subs = [host.subscribe() for _ in range(n)]
    for sub in subs:
        while sub.next_nowait() is not None:
            pass
    server_cpu = 0.0
    snapshot_bytes = 0
    delivered = [0] * n
    published_before = host.published
    for event in events[3:]:
        t0 = time.process_time()
        host.handle(event)
        server_cpu += time.process_time() - t0
        snapshot_bytes += _sse_len(host.published, orjson.dumps(host.view).decode())
        for k, sub in enumerate(subs):
            while (batch := sub.next_nowait()) is not None:
                delivered[k] += _sse_len(batch.id, batch.data)
    published = host.published - published_before
    return {
        "n": n,
        "mode": "distinct streams" if distinct else "shared stream",
        "published": published,
        "cpu_us_per_batch": server_cpu / published * 1e6,
        "delta_bytes_per_sub": sum(delivered) / n,
        "snapshot_bytes": snapshot_bytes,
    }


def bench_update_cost(text_kb: int, iterations: int = 300) -> dict[str, Any]:
    """Cost of one ~100-byte append on a call whose output text is ``text_kb`` KB.

    The tracked reducer applies the ops to a structural copy of the output and
    assigns it back; the tracker's diff must then emit one small ``a``. Compared
    with folding the same update into a plain (untracked) view.
    """
    rng_words = [_line(i) for i in range(5000)]
    base = {
        "content": [{"type": "text", "text": "".join(rng_words)[: text_kb * 1024]}],
        "details": {"exit_code": None, "files": [f"f{i}" for i in range(20)]},
        "terminate": False,
        "truncation": {"truncated": False, "total_lines": 0, "output_lines": 0},
    }
    start = [
        RunStart("run", lane="bench"),
        ToolStart("run", "turn", "call", "bash", {"command": "x"}),
        ToolUpdate("run", "turn", "call", [["r", base]]),
    ]
    host = LaneHost("bench")
    sub = host.subscribe()
    plain = new_lane_view("bench")
    for e in start:
        host.handle(e)
        reduce_lane_snapshot(plain, e)
    while sub.next_nowait() is not None:
        pass
    updates = [
        ToolUpdate("run", "turn", "call", [["a", TEXT, _line(10_000 + i) * 2]])
        for i in range(iterations)
    ]
    tracked = []
    direct = []
    sizes = []
    for u in updates:
        t0 = time.perf_counter()
        host.handle(u)
        tracked.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        reduce_lane_snapshot(plain, u)
        direct.append(time.perf_counter() - t0)
        batch = sub.next_nowait()
        sizes.append(len(batch.data) if batch else 0)
    tracked.sort()
    direct.sort()
    sizes.sort()
    return {
        "kb": text_kb,
        "tracked_us": tracked[len(tracked) // 2] * 1e6,
        "direct_us": direct[len(direct) // 2] * 1e6,
        "batch_bytes": sizes[len(sizes) // 2],
    }


def memory_per_subscriber(n: int) -> float:
    host = LaneHost("bench")
    for event in workload(60):
        host.handle(event)

    def tick(k: int) -> None:
        host.handle(ToolUpdate("run1", "turn", "call", [["s", ["details", "tick"], k]]))

    tracemalloc.start()
    # Warm up one subscribe + publish cycle, so one-off process-wide allocations
    # (serialiser buffers, caches) land in the baseline, not on the subscribers.
    warm = host.subscribe()
    while warm.next_nowait() is not None:
        pass
    tick(0)
    warm.close()
    tick(1)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    subs = [host.subscribe() for _ in range(n)]
    for sub in subs:
        while sub.next_nowait() is not None:
            pass
    # Steady state: after a publish the joiners' shared base text is released.
    tick(2)
    for sub in subs:
        while sub.next_nowait() is not None:
            pass
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del subs
    return (after - before) / n


# --- real HTTP ---------------------------------------------------------------------

BENCH_TOKEN = "benchmark-token-not-a-secret"
"""The server's token in the benchmark (every request needs one)."""


def _serve_child(port: int, n: int, updates: int, interval: float) -> None:
    """Child process: serve the app, wait for n subscribers, publish, report CPU."""
    import uvicorn

    from toolfold.server import create_app

    lanes = Lanes(buffer_batches=4096)
    app = create_app(lanes=lanes, token=BENCH_TOKEN)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    server = uvicorn.Server(config)
    events = workload(updates)

    async def publisher() -> None:
        host = lanes.host("bench")
        for event in events[:3]:  # the call is running before anyone subscribes
            host.handle(event)
        while host.subscribers < n:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        cpu0 = time.process_time()
        snapshot = 0.0
        for event in events[3:]:
            host.handle(event)
            # What a whole-snapshot SSE would send per subscriber at this cadence
            # (kept out of the CPU figure).
            t0 = time.process_time()
            snapshot += _sse_len(host.published, orjson.dumps(host.view).decode())
            cpu0 += time.process_time() - t0
            await asyncio.sleep(interval)
        # Let the writers drain before the streams end.
        while any(b for b, _ in host.backlogs()):
            await asyncio.sleep(0.01)
        cpu = time.process_time() - cpu0
        resyncs = sum(s.resyncs for s in host._subscribers)
        report = {
            "cpu": cpu,
            "published": len(events) - 3,
            "resyncs": resyncs,
            "snapshot": snapshot,
        }
        print(json.dumps(report), flush=True)
        lanes.close()
        server.should_exit = True

    async def main() -> None:
        task = asyncio.create_task(publisher())
        await server.serve()
        await task

    asyncio.run(main())


async def _clients(port: int, n: int) -> list[int]:
    import httpx

    url = f"http://127.0.0.1:{port}/v1/lanes/bench/state"
    limits = httpx.Limits(max_connections=n + 5, max_keepalive_connections=n + 5)
    auth = {"Authorization": f"Bearer {BENCH_TOKEN}"}
    async with httpx.AsyncClient(
        limits=limits, timeout=httpx.Timeout(120.0), headers=auth
    ) as client:

        async def one() -> int:
            # The opening comment and the base (id 0) are not part of the
            # per-batch comparison: count what follows the base event.
            head: bytes | None = b""
            total = 0
            async with client.stream("GET", url) as r:
                async for chunk in r.aiter_bytes():
                    if head is not None:
                        head += chunk
                        start = head.find(b"id: 0\n")
                        end = head.find(b"\n\n", start) if start >= 0 else -1
                        if end < 0:
                            continue
                        chunk, head = head[end + 2 :], None
                    total += len(chunk)
            return total

        return list(await asyncio.gather(*(one() for _ in range(n))))


def bench_http(n: int, updates: int, interval: float) -> dict[str, Any]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), str(n), str(updates), str(interval)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        for _ in range(200):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                time.sleep(0.05)  # the benchmark may poll a child's port; tests may not
        received = asyncio.run(_clients(port, n))
        out, _ = child.communicate(timeout=300)
    finally:
        if child.poll() is None:
            child.kill()
    report = json.loads(out.strip().splitlines()[-1])
    return {
        "n": n,
        "cpu_us_per_batch": report["cpu"] / report["published"] * 1e6,
        "bytes_per_sub": sum(received) / n,
        "resyncs": report["resyncs"],
        "published": report["published"],
        "snapshot": report["snapshot"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer updates, smaller N")
    parser.add_argument("--serve", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        port, n, updates, interval = args.serve
        _serve_child(int(port), int(n), int(updates), float(interval))
        return
    updates = 100 if args.quick else 400
    sizes = [1, 10, 100] if args.quick else [1, 10, 100, 1000]

    print(f"## In-process lane host ({updates} tail-window updates, 1000-line window)\n")
    print(
        "| subscribers | streams | server CPU per batch | delta bytes / subscriber | whole-snapshot SSE bytes | snapshot / delta |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for n in sizes:
        for distinct in (False, True):
            r = bench_in_process(n, updates, distinct)
            ratio = r["snapshot_bytes"] / max(r["delta_bytes_per_sub"], 1)
            print(
                f"| {n} | {r['mode']} | {r['cpu_us_per_batch']:.0f} µs | "
                f"{r['delta_bytes_per_sub']:,.0f} | {r['snapshot_bytes']:,} | {ratio:.0f}× |"
            )
    print("\n## One ~100-byte append, by output size (median)\n")
    print(
        "| output text | tracked reducer + flush + encode | plain-view fold | tracked / plain | batch bytes |"
    )
    print("|---:|---:|---:|---:|---:|")
    for kb in (1, 10, 50, 200):
        r = bench_update_cost(kb)
        print(
            f"| {kb} KB | {r['tracked_us']:.0f} µs | {r['direct_us']:.0f} µs | "
            f"{r['tracked_us'] / max(r['direct_us'], 1e-3):.1f}× | {r['batch_bytes']} |"
        )
    print("\n## Memory per idle subscriber (tracemalloc)\n")
    print("| subscribers | bytes per subscriber |")
    print("|---:|---:|")
    for n in sizes:
        print(f"| {n} | {memory_per_subscriber(n):,.0f} |")
    http_sizes = [1, 10] if args.quick else [1, 10, 100]
    http_updates = 100 if args.quick else 300
    print(
        f"\n## Real HTTP on loopback (uvicorn child process, {http_updates} updates every 5 ms)\n"
    )
    print(
        "| subscribers | server CPU per batch | bytes received / subscriber "
        "| whole-snapshot SSE bytes | snapshot / received | resyncs |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for n in http_sizes:
        r = bench_http(n, http_updates, 0.005)
        print(
            f"| {n} | {r['cpu_us_per_batch']:.0f} µs | {r['bytes_per_sub']:,.0f} | "
            f"{r['snapshot']:,.0f} | {r['snapshot'] / max(r['bytes_per_sub'], 1):.0f}× | "
            f"{r['resyncs']} |"
        )


if __name__ == "__main__":
    main()
