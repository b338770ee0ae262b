"""Benchmarks for toolfold.execenv: peak memory, capture throughput, publication pacing.

Run: .venv/bin/python benchmarks/bench_execenv.py [--quick] [--throughput-only] [--rounds N]

Prints markdown tables. Each comparison runs side by side in the same invocation;
read the ratios. Memory is measured in a child Python process (VmHWM from
/proc/self/status after the capture, minus VmHWM when idle after imports).

Throughput: every round runs, back to back, the same command redirected to
/dev/null (raw), the command piped into ``wc -l`` (a C reader that counts lines: what
one more pipe stage costs), a bare Python reader (a child process that only ``os.read``s the
pipe in 256 KiB reads: the ceiling of any Python-side capture), and the capture with
spill on and off. Ratios are per round (capture / raw from the same round); the table
shows medians over the rounds.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toolfold.execenv import (
    CaptureOptions,
    LocalExecEnv,
    ShellOutputUpdate,
    update_cost,
)

RSS_CHILD = r"""
import asyncio, json, sys, tempfile
from pathlib import Path

def hwm():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no VmHWM")

from toolfold.execenv import LocalExecEnv
idle = hwm()

async def main():
    with tempfile.TemporaryDirectory() as d:
        env = LocalExecEnv(Path(d) / "spill")
        r = await env.exec(sys.argv[1])
        return r.truncation.total_bytes

total = asyncio.run(main())
print(json.dumps({"idle": idle, "peak": hwm(), "total": total}))
"""


def fold_cmd(size: str) -> str:
    return f"head -c {size} /dev/zero | tr '\\0' a | fold -w 100"


def rss(command: str) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, command], check=True, capture_output=True, text=True
    ).stdout
    return dict(json.loads(out))


def bench_rss(sizes: list[str]) -> None:
    print("\n### Peak RSS while capturing (child process, VmHWM)\n")
    print("| output | total bytes | idle MB | peak MB | peak above idle MB |")
    print("|---|---:|---:|---:|---:|")
    for size in sizes:
        r = rss(fold_cmd(size))
        print(
            f"| `{fold_cmd(size)}` | {r['total']:,} | {r['idle'] / 2**20:.1f} | "
            f"{r['peak'] / 2**20:.1f} | {(r['peak'] - r['idle']) / 2**20:.1f} |"
        )


def raw_seconds(command: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", f"{command} > /dev/null"], check=True)
    return time.perf_counter() - t0


BARE_READER = r"""
import os, subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(["bash", "-c", sys.argv[1]], stdout=subprocess.PIPE)
fd = p.stdout.fileno()
while os.read(fd, 262144):
    pass
p.wait()
print(time.perf_counter() - t0)
"""


def bare_reader_seconds(command: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", BARE_READER, command], check=True, capture_output=True, text=True
    ).stdout
    return float(out)


async def capture_seconds(env: LocalExecEnv, command: str, spill: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    r = await env.exec(command, capture=CaptureOptions(spill=spill))
    elapsed = time.perf_counter() - t0
    if r.spill_path:
        Path(r.spill_path).unlink()
    return elapsed, r.truncation.total_bytes


async def bench_throughput(env: LocalExecEnv, commands: list[str], rounds: int) -> None:
    print(
        f"\n### Capture throughput vs the same command redirected to /dev/null "
        f"(median of {rounds} rounds)\n"
    )
    print(
        "| command | bytes | raw MB/s | `\\| wc -l` MB/s (ratio) | bare Python reader MB/s (ratio) "
        "| capture, spill on MB/s | ratio | capture, spill off MB/s | ratio |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cmd in commands:
        raws, wcs, bares, ons, offs = [], [], [], [], []
        total = 0
        for _ in range(rounds):
            raws.append(raw_seconds(cmd))
            wcs.append(raw_seconds(f"{cmd} | wc -l"))
            bares.append(bare_reader_seconds(cmd))
            on, total = await capture_seconds(env, cmd, spill=True)
            ons.append(on)
            off, _ = await capture_seconds(env, cmd, spill=False)
            offs.append(off)
        mb = total / 2**20
        rate = [f"{mb / statistics.median(xs):.0f}" for xs in (raws, wcs, bares, ons, offs)]
        ratio = [
            f"{statistics.median(r / x for r, x in zip(raws, xs, strict=True)):.2f}"
            for xs in (wcs, bares, ons, offs)
        ]
        print(
            f"| `{cmd}` | {total:,} | {rate[0]} | {rate[1]} ({ratio[0]}) | {rate[2]} ({ratio[1]}) | "
            f"{rate[3]} | {ratio[2]} | {rate[4]} | {ratio[3]} |"
        )


WORKLOADS = [
    ("within cap, trickle", "for i in $(seq 1 40); do echo line $i; sleep 0.05; done"),
    ("full speed past cap (101-byte lines)", "seq -f %0100.0f 1 15000000"),
    ("trickle past cap", "seq 1 5000; for i in $(seq 1 100); do echo tick $i; sleep 0.02; done"),
    ("burst then silence", "seq 1 100000; sleep 1"),
    ("progress bar (\\r redraws)", "for i in $(seq 1 2000); do printf '\\r%s%%' $i; done; echo"),
]


async def bench_publishing(env: LocalExecEnv) -> None:
    print("\n### Publication pacing (50 KB cap, 100 ms floor, 100 KiB/s target)\n")
    print(
        "| workload | seconds | updates | updates/s | published KiB/s "
        "| steady updates/s | steady KiB/s | kinds |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, cmd in WORKLOADS:
        updates: list[ShellOutputUpdate] = []
        times: list[float] = []

        def record(
            u: ShellOutputUpdate,
            updates: list[ShellOutputUpdate] = updates,
            times: list[float] = times,
        ) -> None:
            updates.append(u)
            times.append(time.perf_counter())

        t0 = time.perf_counter()
        r = await env.exec(cmd, on_update=record)
        elapsed = time.perf_counter() - t0
        if r.spill_path:
            Path(r.spill_path).unlink()
        kinds: dict[str, int] = {}
        for u in updates:
            kinds[type(u).__name__] = kinds.get(type(u).__name__, 0) + 1
        published = sum(update_cost(u) for u in updates)
        # Steady state: paced publications only (from the leading edge to the last one
        # before the forced final publication), as rate = what was sent / time it took.
        paced = times[:-1]
        if len(paced) >= 3:
            span = paced[-1] - paced[0]
            steady_n = f"{(len(paced) - 1) / span:.1f}"
            steady_b = f"{sum(update_cost(u) for u in updates[: len(paced) - 1]) / span / 1024:.1f}"
        else:
            steady_n = steady_b = "n/a"
        print(
            f"| {name} | {elapsed:.2f} | {len(updates)} | {len(updates) / elapsed:.1f} | "
            f"{published / elapsed / 1024:.1f} | {steady_n} | {steady_b} | "
            + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items()))
            + " |"
        )


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        env = LocalExecEnv(Path(d) / "spill")
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3
        if "--publish-only" not in sys.argv:
            if "--throughput-only" not in sys.argv:
                bench_rss(["10M", "100M"] if quick else ["10M", "1G"])
            big = "100M" if quick else "500M"
            await bench_throughput(env, [f"yes | head -c {big}", fold_cmd(big)], rounds)
        if "--throughput-only" not in sys.argv:
            await bench_publishing(env)


if __name__ == "__main__":
    asyncio.run(main("--quick" in sys.argv))
