"""CLI overhead: ``toolfold run`` against the same command run by bash directly.

Runs each variant a few times (median wall time, child processes, output to a pipe
that is drained) and prints a markdown table with the ratio to plain bash:

    .venv/bin/python benchmarks/bench_cli.py [--repeat N]

- startup: ``toolfold --help`` (interpreter + imports) and a trivial ``run``;
- a 10 MB command (``seq``) through ``run`` on SQLite (default, fsync on) and ``memory:``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]
BIG = "seq -f 'line %08g' 1 750000"


def wall(args: list[str], cwd: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(args, cwd=cwd, capture_output=True, check=False)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp:
        cwd = Path(tmp)
        rows: list[tuple[str, float, float]] = []
        bash_true = wall(["bash", "-c", "true"], cwd, repeat)
        rows.append(("`bash -c true`", bash_true, bash_true))
        rows.append(("`toolfold --help`", wall([*TOOLFOLD, "--help"], cwd, repeat), bash_true))
        rows.append(
            (
                "`toolfold run -- true` (SQLite)",
                wall([*TOOLFOLD, "run", "--", "true"], cwd, repeat),
                bash_true,
            )
        )
        bash_big = wall(["bash", "-c", BIG], cwd, repeat)
        rows.append(("`bash -c seq…` (10.5 MB to a pipe)", bash_big, bash_big))
        rows.append(
            (
                "`toolfold run -- seq…` (SQLite, spill file)",
                wall([*TOOLFOLD, "run", "--", BIG], cwd, repeat),
                bash_big,
            )
        )
        rows.append(
            (
                "`toolfold run --store memory: -- seq…`",
                wall([*TOOLFOLD, "run", "--store", "memory:", "--", BIG], cwd, repeat),
                bash_big,
            )
        )
    print(f"median of {repeat} runs, wall time, output to a pipe\n")
    print("| command | median | vs bash |")
    print("| --- | ---: | ---: |")
    for name, seconds, base in rows:
        print(f"| {name} | {seconds * 1000:.0f} ms | {seconds / base:.1f}x |")


if __name__ == "__main__":
    main()
