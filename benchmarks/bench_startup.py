"""Python start-up of ``toolfold run -- true``: import time as ``python -X importtime``
reports it, against ``python -c 'import asyncio'`` (what any asyncio program pays).

    .venv/bin/python benchmarks/bench_startup.py [--runs 7] [--src DIR]

``--src`` puts another source tree first on ``PYTHONPATH`` (e.g. an older checkout's
``src``) to measure it side by side. Each figure is the minimum over ``--runs`` fresh
processes of the sum of the top-level cumulative import times (the least disturbed
run on a shared machine), plus the heaviest top-level imports of that run.

It also reports the CPU time (``time.process_time``) a fresh process spends importing
``toolfold.cli._run`` — everything ``run`` imports before it starts — which a loaded
machine inflates far less than wall time.

Not measured: the run itself (opening the store, the commits, the command), which
``bench_cli.py`` times as whole processes.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| (\s*)(\S+)")


def import_times(args: list[str], env: dict[str, str], cwd: str) -> dict[str, int]:
    """Top-level module -> cumulative microseconds, for one fresh process."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )
    out: dict[str, int] = {}
    for line in proc.stderr.splitlines():
        m = _LINE.match(line)
        if m and not m.group(2):
            out[m.group(3)] = out.get(m.group(3), 0) + int(m.group(1))
    return out


def best(args: list[str], env: dict[str, str], cwd: str, runs: int) -> dict[str, int]:
    return min((import_times(args, env, cwd) for _ in range(runs)), key=lambda t: sum(t.values()))


def cpu_import(module: str, env: dict[str, str], cwd: str) -> float:
    """CPU seconds one fresh process spends importing ``module`` (CPU time, unlike the
    wall time above, barely moves with the load of a shared machine)."""
    code = (
        "import time; t = time.process_time(); import "
        + module
        + "; print(time.process_time() - t)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, check=True
    )
    return float(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--src", help="a source tree to put first on PYTHONPATH")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as cwd:
        base = best(["-c", "import asyncio"], env, cwd, args.runs)
        run = best(
            ["-m", "toolfold.cli", "run", "--store", "memory:", "--", "true"], env, cwd, args.runs
        )
        cpu_run = min(cpu_import("toolfold.cli._run", env, cwd) for _ in range(args.runs))
        cpu_asyncio = min(cpu_import("asyncio", env, cwd) for _ in range(args.runs))
    total, asyncio_only = sum(run.values()) / 1000, sum(base.values()) / 1000
    print(f"| CPU importing what `run` imports (`toolfold.cli._run`) | {cpu_run * 1000:.0f} ms |")
    print(f"| CPU importing `asyncio` | {cpu_asyncio * 1000:.0f} ms |")
    print(f"| `toolfold run -- true` imports | {total:.0f} ms |")
    print(f"| `python -c 'import asyncio'` imports | {asyncio_only:.0f} ms |")
    print(f"| ratio | {total / asyncio_only:.1f}x |")
    heavy = sorted(run.items(), key=lambda kv: -kv[1])[:6]
    print("heaviest top-level imports: " + ", ".join(f"{k} {v / 1000:.0f} ms" for k, v in heavy))


if __name__ == "__main__":
    main()
