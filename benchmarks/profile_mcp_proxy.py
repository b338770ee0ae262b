"""Where a small proxied call's milliseconds go: a sampling profile of ``toolfold mcp
proxy`` while a client makes ``git_status`` calls through it.

    .venv/bin/pip install py-spy      # not a project dependency
    .venv/bin/python benchmarks/profile_mcp_proxy.py [--calls 150] [--store memory:]
    .venv/bin/python benchmarks/profile_mcp_proxy.py --stages [--calls 300] [--src DIR] [--cpu]

``--stages`` (no py-spy) runs the proxy, and the pass-through SDK proxy
(``mcp_naive_proxy.py``) beside it, under a small wrapper in their process that
counts, between two signals, the event loop's iterations, the tasks it creates (by
coroutine) and the hops from other threads (``call_soon_threadsafe``), reads the
process's CPU, and stamps the time at points on a call's path: the request line
decoded, the proxy's handler entered, the tool body reached, the request written to
the upstream, the upstream's line parsed, the result adopted, the result built, the
answer written. Printed per call: the counters, and the median time between stamps
(the critical path, the upstream's own time apart). A stamp whose function a tree
does not have is left out. With ``--cpu`` the stamps read the event loop thread's own
CPU clock (``time.thread_time``) instead of the wall clock: the median between two
stamps is then the loop's CPU over that stretch, whatever else ran on the machine
(and nothing of the time it waited: the upstream's stretch is the loop's work while
it waited, not the wait).

py-spy samples every thread of the proxy process (``--idle --threads``, 250 Hz) while
the calls run; each sample of the event loop's thread is put in one bucket by the
frames on its stack (first match wins): waiting in ``epoll`` (for the upstream, the
SQLite worker thread or the SDK's stdio threads), toolfold's storage calls, toolfold's
harness/durability/output, pydantic (the SDK's message models), the rest of the SDK
and anyio, everything else. The SQLite worker thread's busy share (inside a commit)
is reported beside it: the flushes the loop waits for. Percentages are of the loop
thread's samples, milliseconds are per call (wall time x share).

Not measured: the upstream's own process (``mcp-server-git``) and the client.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_mcp_proxy import GIT_SERVER, ROOT, find_pid, make_repo

BUCKETS = [
    ("storage (loop side)", ("toolfold/storage",)),
    (
        "toolfold harness, durability, output",
        ("toolfold/harness", "toolfold/durability", "toolfold/output", "toolfold/chord"),
    ),
    ("toolfold mcp host and proxy", ("toolfold/mcp",)),
    ("pydantic (SDK message models)", ("pydantic",)),
    ("MCP SDK and anyio", ("/mcp/", "anyio", "mcp_types")),
]


def bucket(stack: str, leaf: str) -> str:
    if "EpollSelector.select" in stack and ("poll" in leaf or "select" in leaf):
        return "waiting (epoll)"
    for name, marks in BUCKETS:
        if any(m in stack for m in marks):
            return name
    return "asyncio and other"


async def drive(calls: int, out: Path, store: str | None) -> float:
    with tempfile.TemporaryDirectory(prefix="profile-proxy-") as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, 200)
        params = StdioServerParameters(
            command=sys.executable,
            args=[
                "-m",
                "toolfold.cli",
                "mcp",
                "proxy",
                "--store",
                store or f"sqlite:{tmp}/s.db",
                "--session",
                "profile-spy",
                "--",
                str(GIT_SERVER),
            ],
            cwd=tmp,
            env=dict(os.environ),
        )
        with Path(os.devnull).open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (r, w), ClientSession(r, w) as c:
                await c.initialize()
                await c.list_tools()
                for _ in range(5):
                    await c.call_tool("git_status", {"repo_path": str(repo)})
                pid = find_pid("profile-spy")
                spy = subprocess.Popen(
                    [
                        str(ROOT / ".venv" / "bin" / "py-spy"),
                        "record",
                        "--pid",
                        str(pid),
                        "--idle",
                        "--threads",
                        "-f",
                        "raw",
                        "-o",
                        str(out),
                        "-r",
                        "250",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1.5)  # py-spy attaches
                trips = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    await c.call_tool("git_status", {"repo_path": str(repo)})
                    trips.append(time.perf_counter() - t0)
                spy.send_signal(2)
                spy.wait()
    return statistics.median(trips) * 1000


WRAPPER = r"""
import asyncio, collections, functools, json, os, runpy, signal, sys, time
from asyncio import base_events

out = sys.argv.pop(1)
clock = time.thread_time if os.environ.get("PROFILE_STAMP_CLOCK") == "thread" else time.perf_counter
counts = collections.Counter()
tasks = collections.Counter()
stamps = []
state = {"on": False}

def counted(name, key):
    orig = getattr(base_events.BaseEventLoop, name)
    def wrapper(self, *a, **k):
        if state["on"]:
            counts[key] += 1
            if key == "tasks created":
                tasks[getattr(a[0], "__qualname__", type(a[0]).__name__)] += 1
        return orig(self, *a, **k)
    setattr(base_events.BaseEventLoop, name, wrapper)

counted("_run_once", "loop iterations")
counted("create_task", "tasks created")
counted("call_soon_threadsafe", "thread hops (call_soon_threadsafe)")
counted("run_in_executor", "run_in_executor")

def stamp(owner, name, label, after=None):
    try:
        obj = __import__(owner, fromlist=["_"])
        for part in name.split(".")[:-1]:
            obj = getattr(obj, part)
        attr = name.split(".")[-1]
        orig = getattr(obj, attr)
    except (ImportError, AttributeError):
        return
    if asyncio.iscoroutinefunction(orig):
        @functools.wraps(orig)
        async def wrapped(*a, **k):
            if state["on"]:
                stamps.append((label, clock()))
            result = await orig(*a, **k)
            if after and state["on"]:
                stamps.append((after, clock()))
            return result
    else:
        @functools.wraps(orig)
        def wrapped(*a, **k):
            if state["on"]:
                stamps.append((label, clock()))
            result = orig(*a, **k)
            if after and state["on"]:
                stamps.append((after, clock()))
            return result
    setattr(obj, attr, wrapped)

# The request line decoded (toolfold's stdio transport; the pass-through proxy's
# SDK transport has no stamp but the answer written).
stamp("toolfold.mcp._stdio", "LineReader._take", "1 request line decoded")
stamp("toolfold.mcp._proxy", "ProxyHost._call_tool_or_task", "2 proxy handler entered")
stamp("toolfold.mcp._proxy", "ProxyHost._proxy_call", "3 tool body reached")
# The proxy's writer to its upstream (it writes through anyio's stream, or since the
# sixth round under it: the first of the two stamps a call meets counts).
stamp("toolfold.mcp._capped_stdio", "_PipeWriter.send", "4 request written upstream")
stamp("anyio._backends._asyncio", "StreamWriterWrapper.send", "4 request written upstream")
stamp("toolfold.mcp._capped_stdio", "_parse", "5 upstream line read", "6 upstream line parsed")
stamp("toolfold.mcp._proxy", "ProxyHost._adopt", "7 result adopted (window)", "8 adopted")
stamp("toolfold.mcp._proxy", "ProxyHost.result_for", "9 settled, result built")
stamp("toolfold.mcp._stdio", "LineWriter.send", "10 answer written", "11 written")
stamp("anyio._core._fileio", "AsyncFile.write", "10 answer written")

def start(*_):
    counts.clear(); tasks.clear(); stamps.clear()
    state["cpu"] = time.process_time()
    state["on"] = True

def stop(*_):
    state["on"] = False
    with open(out + ".part", "w") as f:
        json.dump({"counts": counts, "tasks": tasks, "stamps": stamps,
                   "cpu": time.process_time() - state["cpu"]}, f)
    os.replace(out + ".part", out)  # whole, or not there yet

signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)
if sys.argv[1].endswith(".py"):
    sys.argv.pop(0)
    sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))  # as `python script.py`
    runpy.run_path(sys.argv[0], run_name="__main__")
else:
    sys.argv[0] = "toolfold"
    runpy.run_module("toolfold.cli", run_name="__main__", alter_sys=True)
"""


def stage_medians(stamps: list[tuple[str, float]]) -> dict[str, float]:
    """Median milliseconds between consecutive stamps of one call (a call starts at its
    request line; a label seen twice in a call counts once, its first time)."""
    calls: list[dict[str, float]] = []
    for label, t in stamps:
        if label.startswith("1 "):
            calls.append({})
        if calls:
            calls[-1].setdefault(label, t)
    gaps: dict[str, list[float]] = collections.defaultdict(list)
    for call in calls:
        ordered = sorted(call.items(), key=lambda kv: kv[1])
        for (a, ta), (b, tb) in itertools.pairwise(ordered):
            gaps[f"{a} → {b}"].append((tb - ta) * 1000)
    return {k: statistics.median(v) for k, v in gaps.items() if len(v) >= 0.8 * len(calls)}


async def stages(calls: int, store: str | None, src: str | None, cpu: bool = False) -> None:
    with tempfile.TemporaryDirectory(prefix="profile-proxy-") as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, 200)
        wrapper = Path(tmp) / "wrapper.py"
        wrapper.write_text(WRAPPER)
        env = dict(os.environ)
        if cpu:
            env["PROFILE_STAMP_CLOCK"] = "thread"
        if src is not None:
            env["PYTHONPATH"] = str(Path(src).resolve())
        rows = [
            ("pass-through SDK proxy", [str(ROOT / "benchmarks" / "mcp_naive_proxy.py")]),
            (
                f"toolfold mcp proxy --store {store or 'sqlite:'}",
                [
                    *("mcp", "proxy", "--store", store or f"sqlite:{tmp}/s.db"),
                    *("--session", "profile-stages", "--"),
                ],
            ),
        ]
        results = []
        async with contextlib.AsyncExitStack() as stack:
            errlog = stack.enter_context(Path(os.devnull).open("w"))  # noqa: SIM115
            clients = []
            for n, (name, command) in enumerate(rows):
                out = Path(tmp) / f"stages-{n}.json"
                params = StdioServerParameters(
                    command=sys.executable,
                    args=[str(wrapper), str(out), *command, str(GIT_SERVER)],
                    cwd=tmp,
                    env=env,
                )
                r, w = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                c = await stack.enter_async_context(ClientSession(r, w))
                await c.initialize()
                await c.list_tools()
                for _ in range(10):
                    await c.call_tool("git_status", {"repo_path": str(repo)})
                pid = find_pid(str(out))
                assert pid is not None
                clients.append((name, c, pid, out))
            for _, _, pid, _ in clients:
                os.kill(pid, signal.SIGUSR1)
            await anyio.sleep(0.2)
            trips: dict[str, list[float]] = {name: [] for name, *_ in clients}
            for _ in range(calls):
                for name, c, _, _ in clients:
                    t0 = time.perf_counter()
                    await c.call_tool("git_status", {"repo_path": str(repo)})
                    trips[name].append((time.perf_counter() - t0) * 1000)
            for _, _, pid, _ in clients:
                os.kill(pid, signal.SIGUSR2)
            for name, _, _, out in clients:
                for _ in range(100):
                    if out.exists():
                        break
                    await anyio.sleep(0.1)
                results.append((name, json.loads(out.read_text())))
    print(
        f"{calls} `git_status` calls per proxy, interleaved; load average "
        f"{os.getloadavg()[0]:.2f}\n"
    )
    print("| per call | " + " | ".join(name for name, _ in results) + " |")
    print("| --- |" + " ---: |" * len(results))
    print(
        "| round trip (median) | "
        + " | ".join(f"{statistics.median(trips[name]):.2f} ms" for name, _ in results)
        + " |"
    )
    print(
        "| CPU of the proxy process | "
        + " | ".join(f"{data['cpu'] / calls * 1000:.2f} ms" for _, data in results)
        + " |"
    )
    keys = sorted({k for _, data in results for k in data["counts"]})
    for key in keys:
        print(
            f"| {key} | "
            + " | ".join(f"{data['counts'].get(key, 0) / calls:.1f}" for _, data in results)
            + " |"
        )
    for name, data in results:
        print(f"\n{name}: tasks created per call, by coroutine")
        for coro, n in sorted(data["tasks"].items(), key=lambda kv: -kv[1]):
            print(f"  {n / calls:4.1f}  {coro}")
        clock = "the loop thread's CPU" if cpu else "wall time"
        print(f"{name}: median {clock} between stamps on a call's path (ms)")
        for gap, ms in stage_medians([tuple(x) for x in data["stamps"]]).items():
            print(f"  {ms:7.3f}  {gap}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=150)
    parser.add_argument("--store", help="the proxy's store (default: SQLite in a temp dir)")
    parser.add_argument(
        "--stages",
        action="store_true",
        help="counters and the call's path, beside the pass-through proxy (no py-spy)",
    )
    parser.add_argument("--src", help="with --stages: another source tree's src/")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="with --stages: stamp the event loop thread's CPU clock, not the wall clock",
    )
    args = parser.parse_args()
    if args.stages:
        anyio.run(stages, args.calls, args.store, args.src, args.cpu)
        return
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "samples.txt"
        per_call = anyio.run(drive, args.calls, out, args.store)
        loop: collections.Counter[str] = collections.Counter()
        sqlite_busy = sqlite_all = 0
        for line in out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            frames = stack.split(";")
            n = int(count)
            if "MainThread" in frames[0]:
                loop[bucket(stack, frames[-1])] += n
            elif "toolfold-sqlite" in frames[0]:
                sqlite_all += n
                sqlite_busy += (
                    n if "_commit_writes" in stack or "SqliteRepository._call" in stack else 0
                )
    total = sum(loop.values())
    print(f"{args.calls} proxied `git_status` calls, median {per_call:.1f} ms each\n")
    print("| the event loop's thread | share | per call |")
    print("| --- | ---: | ---: |")
    for name, n in loop.most_common():
        print(f"| {name} | {100 * n / total:.1f} % | {per_call * n / total:.1f} ms |")
    if sqlite_all:
        share = sqlite_busy / sqlite_all
        print(
            f"| (SQLite worker thread inside a commit) | {100 * share:.1f} % | {per_call * share:.1f} ms |"
        )


if __name__ == "__main__":
    main()
