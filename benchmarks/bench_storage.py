"""Storage commit throughput and latency per backend, fsync on and off.

Two workloads, each a sequence of awaited commits on one session:

- small: one transaction = ``set_value`` of a small dict + ``append_entry`` (session scope);
- 50 KB: one transaction = one 50 KB ``append_list`` into an ephemeral scope (a tool
  output checkpoint of a full window).

Run: ``.venv/bin/python benchmarks/bench_storage.py [--small N] [--large N]``.
PostgreSQL uses ``$TOOLFOLD_TEST_POSTGRES_DSN`` or a throwaway local cluster (fsync on
at the server; the policy maps to ``synchronous_commit``). Prints a markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from toolfold.storage import (  # noqa: E402
    FsyncPolicy,
    Write,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    open_repository,
    set_value,
    value,
)

LARGE = "x" * 50_000


def small_txn(i: int) -> list[Write]:
    return [
        set_value(value("progress", "tool-1"), {"step": i, "status": "running", "pct": i % 100}),
        append_entry({"role": "tool", "seq": i, "content": "ok"}),
    ]


def large_txn(i: int) -> list[Write]:
    addr = list_address("pending.tool_output", "op:inv", ephemeral_scope("op"))
    return [
        append_list(addr, [["r", [], {"text": LARGE, "i": i}]], "base" if i % 50 == 0 else None)
    ]


async def measure(url: str, fsync: FsyncPolicy, make: Any, n: int) -> tuple[float, float, float]:
    repo = open_repository(url, fsync=fsync)
    s = await repo.open_session(f"bench{time.monotonic_ns()}", create=True)
    for i in range(3):  # warm up: connections, schema, first file creation
        await s.commit(make(i))
    lat: list[float] = []
    t0 = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await s.commit(make(i))
        lat.append(time.perf_counter() - t)
    total = time.perf_counter() - t0
    await repo.close()
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    return n / total, statistics.median(lat) * 1e3, p99 * 1e3


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", type=int, default=300)
    ap.add_argument("--large", type=int, default=100)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-storage-"))
    cluster = None
    pg = os.environ.get("TOOLFOLD_TEST_POSTGRES_DSN")
    if pg is None:
        from pg_fixture import start_cluster

        cluster = start_cluster(fsync=True)
        pg = cluster.dsn
    (tmp / "jsonl").mkdir()
    backends = {
        "memory": "memory:",
        "jsonl": f"jsonl:{tmp / 'jsonl'}",
        "sqlite": f"sqlite:{tmp / 'bench.db'}",
        "postgres": pg,
    }
    rows = []
    try:
        for workload, make, n in (
            ("small", small_txn, args.small),
            ("50 KB", large_txn, args.large),
        ):
            for name, url in backends.items():
                on = await measure(url, FsyncPolicy("commit", "commit"), make, n)
                off = await measure(url, FsyncPolicy("none", "none"), make, n)
                rows.append((workload, name, on, off))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if cluster is not None:
            cluster.stop()
    print(f"commits per run: small={args.small}, 50 KB={args.large}\n")
    print(
        "| workload | backend | fsync on: commits/s | p50 ms | p99 ms "
        "| fsync off: commits/s | p50 ms | p99 ms | off/on throughput |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for workload, name, on, off in rows:
        print(
            f"| {workload} | {name} | {on[0]:,.0f} | {on[1]:.2f} | {on[2]:.2f} "
            f"| {off[0]:,.0f} | {off[1]:.2f} | {off[2]:.2f} | {off[0] / on[0]:.1f}x |"
        )


if __name__ == "__main__":
    asyncio.run(main())
