"""Where a small proxied call's milliseconds go: a sampling profile of ``toolfold mcp
proxy`` while a client makes ``git_status`` calls through it.

    .venv/bin/pip install py-spy      # not a project dependency
    .venv/bin/python benchmarks/profile_mcp_proxy.py [--calls 150]

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
import os
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
from bench_mcp_proxy import GIT_SERVER, ROOT, make_repo

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


async def drive(calls: int, out: Path) -> float:
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
                f"sqlite:{tmp}/s.db",
                "--session",
                "profile",
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
                found = subprocess.run(
                    ["pgrep", "-f", f"mcp proxy --store sqlite:{tmp}"],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                pid = int(found.stdout.split()[0])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=150)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "samples.txt"
        per_call = anyio.run(drive, args.calls, out)
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
