"""What a SQLite commit costs besides its flush: the worker thread's share and the rest.

    .venv/bin/python benchmarks/bench_commit_split.py [--pairs 2000] [--rounds 2]

A short call's two commits without the harness: an operation's start (its meta and call
record, in its scope), then its settlement (an entry and the scope's retirement), ``--pairs``
times, on memory and on SQLite with ``FsyncPolicy("none", "none")`` (no flush), the rows
interleaved ``--rounds`` times in one process. For SQLite it also times the function run
on the repository's worker thread (the SQL and the commit into the WAL): the rest of a
pair's time is the hop to the worker and back and the checks every backend makes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from toolfold.storage import (
    FsyncPolicy,
    append_entry,
    ephemeral_scope,
    open_repository,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._sqlite import SqliteRepository

WORKER = [0.0]


def install_timer() -> None:
    original = SqliteRepository._call

    def timed(self: SqliteRepository, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return original(self, fn, *args)
        finally:
            WORKER[0] += time.perf_counter() - t0

    SqliteRepository._call = timed  # type: ignore[method-assign]


async def pairs(url: str, n: int) -> tuple[float, float]:
    repo = open_repository(url, fsync=FsyncPolicy("none", "none"))
    session = await repo.open_session("s", create=True)
    for i in range(50):  # warm-up
        await session.commit([set_value(value("warm", str(i)), i)])
    WORKER[0] = 0.0
    t0 = time.perf_counter()
    for i in range(n):
        scope = ephemeral_scope(f"op{i}")
        await session.commit(
            [
                set_value(value("op.meta", f"op{i}", scope), {"run_id": "r", "after_seq": 3}),
                set_value(value("op.calls", f"op{i}:c", scope), {"tool_name": "ok"}),
            ]
        )
        entry = {"role": "tool", "content": [{"type": "text", "text": "ok\n"}]}
        await session.commit([append_entry(entry, key=f"c{i}"), retire_scope(scope)])
    total = (time.perf_counter() - t0) / n * 1000
    await repo.close()
    return total, WORKER[0] / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    install_timer()
    tmp = Path(tempfile.mkdtemp(prefix="bench-commit-split-"))
    print("| store | round | per start + settlement | on the worker thread |")
    print("| --- | ---: | ---: | ---: |")
    for r in range(args.rounds):
        total, _ = asyncio.run(pairs("memory:", args.pairs))
        print(f"| memory | {r + 1} | {total:.3f} ms | — |")
        total, worker = asyncio.run(pairs(f"sqlite:{tmp / f'{r}.db'}", args.pairs))
        print(f"| SQLite, no flush | {r + 1} | {total:.3f} ms | {worker:.3f} ms |")
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
