"""CPU per ``LocalExecEnv.exec("true")``, unconfined and sandboxed, and what building a
sandboxed command's argv and environment costs, side by side with another tree.

    .venv/bin/python benchmarks/bench_exec_cpu.py [--calls 200] [--before SRC]

CPU is the process's own (every thread) plus the children it reaped (the command, and
for the sandbox bwrap and its namespace's init), from ``os.times()``: on a loaded
machine it moves far less than wall time. Each tree runs in a fresh process, in turn,
``--rounds`` times; medians of the rounds. The sandbox rows need bubblewrap.

Not measured: commands that do work (the spawn is a fixed cost per command), the event
loop's other users (an MCP server's SDK, the store).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


async def _measure(calls: int) -> dict[str, float]:
    from toolfold.execenv import LocalExecEnv, Sandbox

    out: dict[str, float] = {}
    base = Path.home() / ".cache"  # not under /tmp: a sandbox has a private one
    base.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        for name, sandbox in (
            ("unconfined", None),
            ("workspace-write", Sandbox("workspace-write")),
        ):
            env = LocalExecEnv(Path(tmp) / f"spill-{name}", sandbox=sandbox)
            await env.exec("true", cwd=tmp)
            start = _cpu()
            for _ in range(calls):
                await env.exec("true", cwd=tmp)
            out[f"exec {name}"] = (_cpu() - start) / calls * 1000
        sandbox = Sandbox("workspace-write")
        variables = dict(os.environ)
        n = calls * 5
        out["sandbox argv"] = (
            timeit.timeit(
                lambda: sandbox.argv(["bash", "-c", "true"], cwd=tmp, hide=[f"{tmp}/spill"]),
                number=n,
            )
            / n
            * 1000
        )
        out["sandbox env"] = timeit.timeit(lambda: sandbox.env(variables), number=n) / n * 1000
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", help="another source tree's src/ for 'before' rows")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(_measure(args.child))))
        return
    trees = [("after", None)] + ([("before", args.before)] if args.before else [])
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    for _ in range(args.rounds):
        for name, src in trees:
            env = {**os.environ, "PYTHONPATH": src} if src else None
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(args.calls)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            runs[name].append(json.loads(done.stdout))
    print(f"load average: {os.getloadavg()[0]:.2f}; {args.calls} calls, {args.rounds} rounds\n")
    print("| measure | " + " | ".join(name for name, _ in trees) + " |")
    print("| --- |" + " ---: |" * len(trees))
    for key in runs["after"][0]:
        cells = [f"{statistics.median(r[key] for r in runs[name]):.3f} ms" for name, _ in trees]
        what = "CPU per call" if key.startswith("exec") else "per call"
        print(f"| {key} ({what}) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
