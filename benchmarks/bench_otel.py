"""What tracing and metrics cost a call: ``Harness.run`` of a trivial tool, and a
``tools/call`` through ``toolfold mcp``, off and on.

    .venv/bin/python benchmarks/bench_otel.py [--calls 3000] [--rounds 5] [--before SRC]
        [--mcp-calls 300]

The harness table:

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
  (an exporter's network or batching cost is not included);
- ``on, SDK traces + metrics``: the same, and the SDK's ``MeterProvider`` with an
  ``InMemoryMetricReader`` (the instruments record; nothing collects during the run).

The MCP table (``--mcp-calls``, 0 to skip): ``toolfold mcp --store memory:`` servers
over stdio, driven by the official SDK client, all connected at once and taking turns
(one call each per round, each round starting with the next server, so a change in the
machine's load hits every row alike). Each
call is ``read`` of a 3-line file: no process is started, so the MCP path (JSON-RPC,
the SDK's own request span, toolfold's middleware, the harness, the store) is the
whole cost. Rows: ``before`` (``--before SRC``), ``off`` (no provider: the MCP SDK
imports the OpenTelemetry API, so this is the API-imported case), ``on`` (the server
started by a wrapper that sets the SDK's tracer and meter providers with in-memory
exporter and reader, as ``opentelemetry-instrument`` would with real exporters).

Not measured: tracing's effect on calls that do real work (a ``bash`` call is ~1000x
the trivial call, docs/BENCHMARKS.md), an exporter's own cost, memory.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import asyncio, json, statistics, sys, time
mode, calls = sys.argv[1], int(sys.argv[2])
if mode in ("api", "sdk", "sdk+metrics"):
    from opentelemetry import trace
if mode in ("sdk", "sdk+metrics"):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    trace.set_tracer_provider(provider)
if mode == "sdk+metrics":
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
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


# Runs toolfold's CLI with the SDK's providers set, exporting nowhere (in memory).
ON_WRAPPER = r"""
import runpy, sys
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
trace.set_tracer_provider(provider)
metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
sys.argv = ["toolfold", *sys.argv[1:]]
runpy.run_module("toolfold.cli", run_name="__main__", alter_sys=True)
"""


async def mcp_rows(calls: int, before: str | None) -> list[tuple[str, list[float]]]:
    from contextlib import AsyncExitStack

    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    with tempfile.TemporaryDirectory(prefix="bench-otel-mcp-") as tmp:
        cwd = Path(tmp)
        (cwd / "small.txt").write_text("one\ntwo\nthree\n")
        serve = ["mcp", "--store", "memory:"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        servers: list[tuple[str, list[str], dict[str, str]]] = []
        if before is not None:
            servers.append(
                ("before", ["-m", "toolfold.cli", *serve], {**env, "PYTHONPATH": before})
            )
        here = {**env, "PYTHONPATH": str(ROOT / "src")}
        servers.append(("off (no provider)", ["-m", "toolfold.cli", *serve], here))
        servers.append(("on, SDK traces + metrics", ["-c", ON_WRAPPER, *serve], here))
        async with AsyncExitStack() as stack:
            clients: list[ClientSession] = []
            for _name, args, server_env in servers:
                params = StdioServerParameters(
                    command=sys.executable, args=args, cwd=str(cwd), env=server_env
                )
                log = stack.enter_context((cwd / f"{len(clients)}.err").open("w"))
                r, w = await stack.enter_async_context(stdio_client(params, errlog=log))
                client = await stack.enter_async_context(ClientSession(r, w))
                await client.initialize()
                clients.append(client)
            times: list[list[float]] = [[] for _ in servers]
            arguments = {"path": str(cwd / "small.txt")}
            for round_no in range(calls + 20):
                # Each round starts with the next server: none is always first.
                shift = round_no % len(clients)
                turns = list(zip(clients, times, strict=True))
                for client, row in turns[shift:] + turns[:shift]:
                    t0 = time.perf_counter()
                    result = await client.call_tool("read", arguments)
                    elapsed = time.perf_counter() - t0
                    if result.is_error:
                        raise SystemExit(f"read failed: {result.content}")
                    if round_no >= 20:  # the first 20 rounds warm up
                        row.append(elapsed)
            return [(name, row) for (name, _, _), row in zip(servers, times, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=3000, help="0 skips the harness table")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before", help="another source tree's src/ for the 'before' rows")
    parser.add_argument("--mcp-calls", type=int, default=300, help="0 skips the MCP table")
    args = parser.parse_args()
    print(f"load average: {os.getloadavg()[0]:.1f}\n")
    rows: list[tuple[str, Path, str]] = []
    if args.before:
        rows.append(("before (no tracing code)", Path(args.before).resolve(), "off"))
    here = ROOT / "src"
    rows += [
        ("off, not imported", here, "off"),
        ("off, API imported, no provider", here, "api"),
        ("on, SDK + in-memory exporter", here, "sdk"),
        ("on, SDK traces + metrics", here, "sdk+metrics"),
    ]
    medians: dict[str, list[float]] = {name: [] for name, _, _ in rows}
    for _ in range(args.rounds if args.calls > 0 else 0):
        for name, src, mode in rows:
            medians[name].append(run(src, mode, args.calls))
    if args.calls > 0:
        base = statistics.median(medians[rows[0][0]])
        print(f"| configuration | per call (median of {args.rounds} medians) | vs {rows[0][0]} |")
        print("| --- | ---: | ---: |")
        for name, _, _ in rows:
            m = statistics.median(medians[name])
            print(f"| {name} | {m * 1e6:.1f} µs | {m / base:.3f}x |")
    if args.mcp_calls > 0:
        import anyio

        before = str(Path(args.before).resolve()) if args.before else None
        found = anyio.run(mcp_rows, args.mcp_calls, before)
        first = statistics.median(found[0][1])
        fastest = sorted(found[0][1])[len(found[0][1]) // 10]
        print(f"\n`read` through `toolfold mcp`, {args.mcp_calls} calls per server, taking turns")
        print(f"\n| server | round trip (median) | p10 | p90 | vs {found[0][0]} (median, p10) |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, times in found:
            ordered = sorted(times)
            m, p10 = statistics.median(times), ordered[len(ordered) // 10]
            p90 = ordered[int(0.9 * (len(ordered) - 1))]
            print(
                f"| {name} | {m * 1e3:.2f} ms | {p10 * 1e3:.2f} ms | {p90 * 1e3:.2f} ms "
                f"| {m / first:.3f}x, {p10 / fastest:.3f}x |"
            )
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
