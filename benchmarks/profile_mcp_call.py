"""Where a trivial ``toolfold mcp`` call's CPU goes: a cProfile of the server process
after its start-up, and what the event loop does per call.

    .venv/bin/python benchmarks/profile_mcp_call.py [--calls 300] [--store memory:]
        [--sandbox off] [--top 25] [--src DIR] [--no-profile | --stages]

The server is ``toolfold mcp`` started through a small wrapper (in the server
process) that, on SIGUSR1, starts cProfile and counters of the event loop: its
iterations (``_run_once``), the tasks created, the callbacks scheduled
(``call_soon``), the hops from other threads (``call_soon_threadsafe``) and the
functions sent to a thread (``run_in_executor``), the cyclic garbage collector's
passes and their CPU; on SIGUSR2 it writes them out.
The client (the SDK's, over stdio) makes 30 ``bash true`` calls to warm up, signals,
makes ``--calls`` more, one at a time, and signals again. Printed: the counters per
call, the main thread's CPU per call by package (cProfile's own time, "self", each
function put in the package of its file), and the ``--top`` functions by own time.

``--stages`` runs the server under ``profile_mcp_proxy.py``'s stamping wrapper instead
and prints the median time between points on a call's path: the request line read,
the host's handler, the durable start and its commit, the shell spawned and its exit
seen on its pidfd, the teardown, the settlement, the result built, the answer
written (a tree without one of those functions leaves its stamp out).

cProfile (timed by the thread's CPU clock, so waiting in ``epoll`` costs nothing)
slows what it profiles (each Python call costs more), so the shares are what to
read, not the absolute milliseconds; a worker thread (SQLite's) is not profiled,
only the loop's thread. A ``fork_exec`` is charged the parent's side only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pstats
import signal
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]

WRAPPER = r"""
import asyncio, cProfile, collections, json, os, signal, sys, threading, time
from asyncio import base_events, events

counts = collections.Counter()
tasks = collections.Counter()
state = {"on": False, "prof": None, "cpu": 0.0, "wall": 0.0}
out = sys.argv.pop(1)
profiling = sys.argv.pop(1) == "profile"

orig_run_once = base_events.BaseEventLoop._run_once
orig_call_soon = base_events.BaseEventLoop.call_soon
orig_threadsafe = base_events.BaseEventLoop.call_soon_threadsafe
orig_executor = base_events.BaseEventLoop.run_in_executor
orig_create_task = base_events.BaseEventLoop.create_task

def run_once(self):
    if state["on"]:
        counts["loop iterations"] += 1
    return orig_run_once(self)

def call_soon(self, *a, **k):
    if state["on"]:
        counts["call_soon"] += 1
    return orig_call_soon(self, *a, **k)

def threadsafe(self, *a, **k):
    if state["on"]:
        counts["call_soon_threadsafe (thread hops)"] += 1
    return orig_threadsafe(self, *a, **k)

def executor(self, *a, **k):
    if state["on"]:
        counts["run_in_executor"] += 1
    return orig_executor(self, *a, **k)

def create_task(self, coro, *a, **k):
    if state["on"]:
        counts["tasks created"] += 1
        tasks[getattr(coro, "__qualname__", type(coro).__name__)] += 1
    return orig_create_task(self, coro, *a, **k)

base_events.BaseEventLoop._run_once = run_once
base_events.BaseEventLoop.call_soon = call_soon
base_events.BaseEventLoop.call_soon_threadsafe = threadsafe
base_events.BaseEventLoop.run_in_executor = executor
base_events.BaseEventLoop.create_task = create_task

def start(*_):
    counts.clear()
    tasks.clear()
    state["cpu"] = time.thread_time()
    state["pcpu"] = time.process_time()
    state["wall"] = time.perf_counter()
    state["on"] = True
    if profiling:
        prof = cProfile.Profile(time.thread_time)  # CPU, not wall time (waits excluded)
        state["prof"] = prof
        prof.enable()

def stop(*_):
    state["on"] = False
    if profiling:
        state["prof"].disable()
        state["prof"].dump_stats(out + ".prof")
    with open(out + ".json", "w") as f:
        json.dump({"counts": counts, "tasks": tasks, "thread_cpu": time.thread_time() - state["cpu"],
                   "process_cpu": time.process_time() - state["pcpu"],
                   "wall": time.perf_counter() - state["wall"]}, f)

import gc
gc_start = [0.0]

def gc_watch(phase, info):
    if not state["on"]:
        return
    if phase == "start":
        gc_start[0] = time.thread_time()
    else:
        counts[f"gc collections (generation {info['generation']})"] += 1
        counts["gc CPU (us)"] += (time.thread_time() - gc_start[0]) * 1e6

gc.callbacks.append(gc_watch)
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
import runpy
sys.argv[0] = "toolfold"
runpy.run_module("toolfold.cli", run_name="__main__", alter_sys=True)
"""

PACKAGES = [
    ("toolfold mcp", "toolfold/mcp/"),
    ("toolfold harness", "toolfold/harness/"),
    ("toolfold output", "toolfold/output/"),
    ("toolfold execenv", "toolfold/execenv/"),
    ("toolfold durability", "toolfold/durability/"),
    ("toolfold storage", "toolfold/storage/"),
    ("toolfold (other)", "toolfold/"),
    ("MCP SDK", "/mcp/"),
    ("mcp_types", "mcp_types"),
    ("anyio", "/anyio/"),
    ("pydantic", "pydantic"),
    ("opentelemetry", "opentelemetry"),
    ("asyncio", "/asyncio/"),
    ("subprocess", "subprocess.py"),
]


def package_of(filename: str) -> str:
    for name, marker in PACKAGES:
        if marker in filename:
            return name
    if filename.startswith("~") or filename == "":
        return "builtins (C)"
    return "other Python"


async def drive(args: argparse.Namespace, out: str) -> None:
    work = Path(tempfile.mkdtemp(prefix="profile_mcp_"))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(args.src).resolve()) if args.src else str(ROOT / "src")
    env.pop("TOOLFOLD_STORE", None)
    wrapper = work / "wrapper.py"
    wrapper.write_text(WRAPPER)
    store = args.store or f"sqlite:{work / 'store.db'}"
    mode = "count" if args.no_profile else "profile"
    server_args = [str(wrapper), out, mode, "mcp", "--store", store]
    if args.sandbox:
        server_args += ["--sandbox", args.sandbox]
    params = StdioServerParameters(command=sys.executable, args=server_args, env=env, cwd=work)
    async with stdio_client(params) as (r, w), ClientSession(r, w) as client:
        await client.initialize()
        for _ in range(30):
            await client.call_tool("bash", {"command": "true"})
        pid = find_server(wrapper)
        os.kill(pid, signal.SIGUSR1)
        await anyio.sleep(0.2)
        started = time.perf_counter()
        for _ in range(args.calls):
            await client.call_tool("bash", {"command": "true"})
        wall = time.perf_counter() - started
        os.kill(pid, signal.SIGUSR2)
        for _ in range(100):
            if Path(out + ".json").exists():
                break
            await anyio.sleep(0.1)
    print(f"{args.calls} calls, {wall / args.calls * 1000:.2f} ms per call (round trip)")


def find_server(wrapper: Path) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(part == str(wrapper).encode() for part in cmdline):
                return int(entry.name)
    raise SystemExit("server process not found")


# Stamps on one call's critical path (the first one starts a call; see
# profile_mcp_proxy.stage_medians), for --stages.
STAMPS = r"""
stamp("toolfold.mcp._stdio", "LineReader._take", "1 request line decoded")
stamp("toolfold.mcp._host", "McpHost._dispatch", "2 host handler entered")
stamp("toolfold.durability._operations", "Durability.start_operation",
      "3 durable start", "4 start committed")
stamp("toolfold.execenv._spawn", "start_pidfd_child", "5 shell being started")
stamp("toolfold.execenv._spawn", "PidfdChild._on_ready", "6 shell exited (pidfd)")
stamp("toolfold.execenv._local", "LocalExecEnv._teardown", "7 teardown", "8 torn down")
stamp("toolfold.durability._operations", "DurableOperation.settle",
      "9 settlement", "10 settled")
stamp("toolfold.mcp._host", "McpHost.result_for", "11 result built")
stamp("toolfold.mcp._stdio", "LineWriter.send", "12 answer written", "13 written")
"""


async def stages(args: argparse.Namespace) -> None:
    """Median milliseconds between stamps on a trivial call's path (the server's part of
    the round trip, the shell's own life between "spawned" and "exited")."""
    from profile_mcp_proxy import WRAPPER as STAMP_WRAPPER
    from profile_mcp_proxy import stage_medians

    wrapper_text = STAMP_WRAPPER.split("# The request line decoded")[0] + STAMPS
    wrapper_text += "\ndef start" + STAMP_WRAPPER.split("\ndef start", 1)[1]
    work = Path(tempfile.mkdtemp(prefix="profile_mcp_"))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(args.src).resolve()) if args.src else str(ROOT / "src")
    env.pop("TOOLFOLD_STORE", None)
    wrapper = work / "stages.py"
    wrapper.write_text(wrapper_text)
    out = work / "stages.json"
    store = args.store or f"sqlite:{work / 'store.db'}"
    server_args = [str(wrapper), str(out), "mcp", "--store", store]
    if args.sandbox:
        server_args += ["--sandbox", args.sandbox]
    params = StdioServerParameters(command=sys.executable, args=server_args, env=env, cwd=work)
    trips: list[float] = []
    async with stdio_client(params) as (r, w), ClientSession(r, w) as client:
        await client.initialize()
        for _ in range(30):
            await client.call_tool("bash", {"command": "true"})
        pid = find_server(wrapper)
        os.kill(pid, signal.SIGUSR1)
        await anyio.sleep(0.2)
        for _ in range(args.calls):
            t0 = time.perf_counter()
            await client.call_tool("bash", {"command": "true"})
            trips.append((time.perf_counter() - t0) * 1000)
        os.kill(pid, signal.SIGUSR2)
        for _ in range(100):
            if out.exists():
                break
            await anyio.sleep(0.1)
    data = json.loads(out.read_text())
    trips.sort()
    print(
        f"{args.calls} calls; round trip median {trips[len(trips) // 2]:.3f} ms; server "
        f"CPU {data['cpu'] / args.calls * 1000:.3f} ms a call; load average "
        f"{os.getloadavg()[0]:.2f}\n"
    )
    print("| stretch of one call | median ms |\n| --- | ---: |")
    for label, ms in stage_medians([(a, b) for a, b in data["stamps"]]).items():
        print(f"| {label} | {ms:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--store", default=None, help="default: SQLite in a temp dir")
    parser.add_argument("--sandbox", default=None, help="e.g. off (default: toolfold's)")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--src", default=None, help="another source tree's src/")
    parser.add_argument(
        "--no-profile",
        action="store_true",
        help="only the counters and the CPU per call (no cProfile: unslowed figures)",
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="the median time between stamps on a call's path instead (no cProfile)",
    )
    args = parser.parse_args()
    if args.stages:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        anyio.run(stages, args)
        return
    out = tempfile.mktemp(prefix="profile_mcp_call_")
    anyio.run(drive, args, out)
    data = json.loads(Path(out + ".json").read_text())
    n = args.calls
    print(f"load average: {os.getloadavg()[0]:.2f}")
    print(
        f"server main thread CPU per call: {data['thread_cpu'] / n * 1000:.3f} ms "
        f"(process, threads included: {data['process_cpu'] / n * 1000:.3f} ms"
        + ("" if args.no_profile else "; under cProfile")
        + "; the commands' own CPU not included)"
    )
    print("\n| per call | count |\n| --- | ---: |")
    for key, value in sorted(data["counts"].items()):
        print(f"| {key} | {value / n:.1f} |")
    print("\n| task created (coroutine) | per call |\n| --- | ---: |")
    for key, value in sorted(data["tasks"].items(), key=lambda kv: -kv[1]):
        print(f"| `{key}` | {value / n:.1f} |")
    if args.no_profile:
        return
    stats = pstats.Stats(out + ".prof")
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    by_package: collections.Counter[str] = collections.Counter()
    for (filename, _line, _name), (_cc, _nc, tt, _ct, _callers) in raw.items():
        by_package[package_of(filename)] += tt
    print("\n| package (own time) | share | per call |\n| --- | ---: | ---: |")
    for name, tt in by_package.most_common():
        print(f"| {name} | {tt / total * 100:.1f} % | {tt / n * 1000:.3f} ms |")
    print(f"\ntop {args.top} functions by own time:")
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
