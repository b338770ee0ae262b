"""CPU of one hop to the SQLite store's worker thread and back, with the worker asleep
in between (as between a server's calls): ``loop.run_in_executor`` on a one-thread
``ThreadPoolExecutor`` (the store until the sixth round) against ``WorkerThread``.

    .venv/bin/python benchmarks/bench_worker_hop.py [--hops 300] [--rounds 12] [--gap 0.001]

Each round runs ``--hops`` hops of a function that does nothing, each followed by an
``asyncio.sleep(gap)`` (so both threads go to sleep before the next), for each way in
turn, and a round of the sleeps alone; the process's CPU (every thread's
``/proc/self/task/*/schedstat``, nanoseconds) over a round, less the sleeps-alone
round's, divided by the hops, is a hop's CPU. Printed: the medians over the rounds.

Not measured: the work a hop carries (a commit), which is the same either way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from toolfold.storage._worker import WorkerThread


def process_cpu_ns() -> int:
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total


def nothing() -> int:
    return 1


async def run(hops: int, rounds: int, gap: float) -> None:
    loop = asyncio.get_running_loop()
    executor = ThreadPoolExecutor(max_workers=1)
    worker = WorkerThread("hop")
    ways: dict[str, Callable[[], Awaitable[int]] | None] = {
        "sleeps alone": None,
        "run_in_executor (ThreadPoolExecutor, 1 thread)": lambda: loop.run_in_executor(
            executor, nothing
        ),
        "WorkerThread": lambda: worker.submit(nothing),
    }
    per_round: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds + 1):  # the first round warms up and is dropped
        for name, hop in ways.items():
            start = process_cpu_ns()
            for _ in range(hops):
                if hop is not None:
                    await hop()
                await asyncio.sleep(gap)
            per_round[name].append((process_cpu_ns() - start) / hops / 1000)
    executor.shutdown()
    worker.shutdown()
    base = statistics.median(per_round["sleeps alone"][1:])
    print(
        f"{hops} hops per round, {rounds} rounds, {gap * 1000:g} ms asleep between hops; "
        f"load average {os.getloadavg()[0]:.2f}\n"
    )
    print("| way | CPU per hop (all threads, the sleeps' own taken off) |")
    print("| --- | ---: |")
    for name in list(ways)[1:]:
        print(f"| {name} | {statistics.median(per_round[name][1:]) - base:.1f} µs |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hops", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--gap", type=float, default=0.001)
    args = parser.parse_args()
    asyncio.run(run(args.hops, args.rounds, args.gap))


if __name__ == "__main__":
    main()
