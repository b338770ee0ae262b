"""What tracing costs a call: ``Harness.run`` of a trivial tool, tracing off and on.

    .venv/bin/python benchmarks/bench_otel.py [--calls 3000] [--rounds 5] [--before SRC]

One tool that writes ``ok``, one ``Harness.run`` per call, awaited in turn, no store:
the smallest call there is, so a fixed per-call cost shows as much as it can. Each
configuration runs in a fresh process, the configurations interleaved, ``--rounds``
times; each figure is the median over the rounds of the per-round median call time.

- ``before``: another source tree (``git archive <commit> src | tar -x -C /tmp/before``,
  then ``--before /tmp/before/src``): the harness without tracing code at all;
- ``off, not imported``: nothing imported opentelemetry (toolfold never does);
- ``off, API imported``: ``opentelemetry.trace`` is imported (as pydantic-ai and other
  frameworks do) but no tracer provider is configured: the API's proxy provider;
- ``on, SDK``: the SDK's ``TracerProvider`` with a ``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter``: what a span with its attributes costs when someone listens
  (an exporter's network or batching cost is not included).

Not measured: tracing's effect on calls that do real work (a ``bash`` call is ~1000x
this call, docs/BENCHMARKS.md), an exporter's own cost, memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import asyncio, json, statistics, sys, time
mode, calls = sys.argv[1], int(sys.argv[2])
if mode in ("api", "sdk"):
    from opentelemetry import trace
if mode == "sdk":
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
from pydantic import BaseModel
from toolfold.harness import Harness, ToolCall, tool

class NoParams(BaseModel):
    pass

@tool(params=NoParams)
async def trivial(call_id, params, cancel, out, ctx) -> None:
    "Writes ok."
    out.write("ok")

async def main() -> list[float]:
    harness = Harness([trivial])
    call = [ToolCall("c1", "trivial", {})]
    for _ in range(200):  # warm-up
        await harness.run(call)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        await harness.run(call)
        times.append(time.perf_counter() - t0)
    return times

times = asyncio.run(main())
if mode == "off":
    assert not [m for m in sys.modules if m.startswith("opentelemetry")]
print(json.dumps({"median": statistics.median(times)}))
"""


def run(src: Path, mode: str, calls: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(calls)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(done.stdout)["median"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="another source tree's src/ for the 'before' row")
    args = parser.parse_args()
    rows: list[tuple[str, Path, str]] = []
    if args.before:
        rows.append(("before (no tracing code)", Path(args.before).resolve(), "off"))
    here = ROOT / "src"
    rows += [
        ("off, not imported", here, "off"),
        ("off, API imported, no provider", here, "api"),
        ("on, SDK + in-memory exporter", here, "sdk"),
    ]
    medians: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    for _ in range(args.rounds):
        for name, src, mode in rows:
            medians[name].append(run(src, mode, args.calls))
    base = statistics.median(medians[rows[0][0]])
    print(f"| configuration | per call (median of {args.rounds} medians) | vs {rows[0][0]} |")
    print("| --- | ---: | ---: |")
    for name, _, _ in rows:
        m = statistics.median(medians[name])
        print(f"| {name} | {m * 1e6:.1f} µs | {m / base:.3f}x |")


if __name__ == "__main__":
    main()
