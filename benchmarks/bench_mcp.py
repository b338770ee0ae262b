"""``toolfold mcp`` against a minimal ``subprocess.run`` MCP shell server, side by side.

Both servers are driven over stdio by the official SDK client, on the same command:

    .venv/bin/python benchmarks/bench_mcp.py [--mb 100] [--true-calls 20] [--before SRC]

Reported per server, for one call of a command printing about ``--mb`` MB of lines:

- bytes to the client: the JSON of every message the client got for the call (the
  result plus progress notifications), as the client re-serializes them;
- the server's peak RSS (``VmHWM`` of the server process, read from /proc just
  before it is stopped);
- time to the first progress notification (the baseline sends none);
- total time from sending the call to holding the result;
- overhead for ``true``: the median round trip of ``--true-calls`` calls. The servers
  stay connected and take turns, one ``true`` each per round, so a change in the
  machine's load hits every row alike;
- the server's CPU per ``true`` (its own, its threads' and its commands', from
  ``/proc/PID/stat`` in clock ticks, over the ``--true-calls`` calls): what a call
  costs the machine, which a loaded machine does not inflate the way it inflates the
  round trip.

``--memory`` adds a row for ``toolfold mcp --store memory:``: the same server with a
store that never touches the disk, so the gap between it and the SQLite row is what
the store's flushes cost (``bench_small_call.py`` counts them).

``toolfold mcp`` confines its commands (bubblewrap, ``workspace-write``) unless told
``--sandbox off``; the plain server does not. ``--unconfined`` adds the rows that
compare like with like: ``toolfold mcp --sandbox off`` (SQLite and memory, and the
``--before`` tree's), and the plain server running each command in bubblewrap with the
same rules (``mcp_naive_server.py --sandbox``): what confinement alone costs.

Every run also has the plain server made durable the least way
(``mcp_naive_server.py --durable``: a start row and a result row per call, SQLite WAL,
``synchronous = FULL``, each commit on a worker thread), and with ``--unconfined`` the
same in bubblewrap: the "plain server with the same durability" toolfold's SQLite rows
compare to.

``--before SRC`` adds a row for ``toolfold mcp`` run from another source tree (e.g.
``git archive <commit> src | tar -x -C /tmp/before`` then ``--before /tmp/before/src``),
for before/after figures from one run.

Not measured: the client's own memory (the baseline's 100 MB result costs the client
more than the server), what the model does with the text, and the toolfold store's
fsync cost on other disks (the store here is SQLite on the benchmark's temp dir).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent


def big_command(mb: int) -> str:
    # Numbered 10-byte lines ("%09g\n"): mb * 100,000 of them make mb MB (10^6 bytes).
    return f"seq -f '%09g' 1 {mb * 100_000}"


def vm_hwm(pid: int) -> int:
    """Peak resident set of ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def children() -> set[int]:
    """The pids of this process's children (each server is one, started by the SDK)."""
    me = str(os.getpid())
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if stat.rpartition(")")[2].split()[1] == me:
                found.add(int(entry.name))
    return found


def cpu_ticks(pid: int) -> int:
    """CPU time of ``pid`` and of the children it waited for (its commands), in clock
    ticks (user + system, ``/proc/PID/stat`` fields 14-17)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(f) for f in fields[11:15])


async def measure(
    name: str, params: StdioServerParameters, command: str, stack: AsyncExitStack
) -> tuple[dict[str, Any], ClientSession]:
    log = Path(params.cwd or ".") / f"{name.replace(' ', '-').replace(',', '')}.err"
    errlog = stack.enter_context(log.open("w"))
    before = children()
    r, w = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    client = await stack.enter_async_context(ClientSession(r, w))
    await client.initialize()
    # The server's own pid, from our side: a sandboxed command sees a PID namespace of
    # its own, where $PPID is not the server.
    [pid] = children() - before
    progress: list[tuple[float, int]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        size = len(json.dumps({"progress": value, "total": total, "message": message}))
        progress.append((time.perf_counter(), size))

    start = time.perf_counter()
    result = await client.call_tool("bash", {"command": command}, progress_callback=on_progress)
    total = time.perf_counter() - start
    result_bytes = len(result.model_dump_json(by_alias=True, exclude_none=True))
    row = {
        "server": name,
        "bytes": result_bytes + sum(size for _, size in progress),
        "progress": len(progress),
        "first_progress": (progress[0][0] - start) if progress else None,
        "total": total,
        "rss": vm_hwm(pid),
        "pid": pid,
    }
    return row, client


async def run(
    mb: int, calls: int, before: str | None, memory: bool, unconfined: bool
) -> list[dict[str, Any]]:
    command = big_command(mb)
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        cwd = Path(tmp)
        servers = [
            (
                "subprocess.run server",
                StdioServerParameters(
                    command=sys.executable, args=[str(HERE / "mcp_naive_server.py")], cwd=str(cwd)
                ),
            ),
            (
                "toolfold mcp",
                StdioServerParameters(
                    command=sys.executable,
                    args=["-m", "toolfold.cli", "mcp", "--store", f"sqlite:{cwd / 'store.db'}"],
                    cwd=str(cwd),
                ),
            ),
        ]
        if unconfined:
            # The baseline before the plain server ran bash: the same server on /bin/sh.
            sh = [str(HERE / "mcp_naive_server.py"), "--shell", "/bin/sh"]
            servers.append(
                (
                    "subprocess.run server, sh (dash)",
                    StdioServerParameters(command=sys.executable, args=sh, cwd=str(cwd)),
                )
            )
        if memory:
            servers.append(
                (
                    "toolfold mcp --store memory:",
                    StdioServerParameters(
                        command=sys.executable,
                        args=["-m", "toolfold.cli", "mcp", "--store", "memory:"],
                        cwd=str(cwd),
                    ),
                )
            )
        servers.append(
            (
                "subprocess.run server, durable (SQLite FULL)",
                StdioServerParameters(
                    command=sys.executable,
                    args=[str(HERE / "mcp_naive_server.py"), "--durable", str(cwd / "plain.db")],
                    cwd=str(cwd),
                ),
            )
        )
        if before is not None:
            servers.append(
                (
                    "toolfold mcp, before",
                    StdioServerParameters(
                        command=sys.executable,
                        args=["-m", "toolfold.cli", "mcp", "--store", f"sqlite:{cwd / 'old.db'}"],
                        cwd=str(cwd),
                        env={**os.environ, "PYTHONPATH": before},
                    ),
                )
            )
        if unconfined:
            naive = [sys.executable, str(HERE / "mcp_naive_server.py"), "--sandbox"]
            servers.append(
                (
                    "subprocess.run server in bubblewrap",
                    StdioServerParameters(command=naive[0], args=naive[1:], cwd=str(cwd)),
                )
            )
            durable = [*naive, "--durable", str(cwd / "plain-bwrap.db")]
            servers.append(
                (
                    "subprocess.run server in bubblewrap, durable (SQLite FULL)",
                    StdioServerParameters(command=durable[0], args=durable[1:], cwd=str(cwd)),
                )
            )
            off = ["--sandbox", "off"]
            servers.append(
                (
                    "toolfold mcp --sandbox off",
                    StdioServerParameters(
                        command=sys.executable,
                        args=[
                            "-m",
                            "toolfold.cli",
                            "mcp",
                            "--store",
                            f"sqlite:{cwd / 'u.db'}",
                            *off,
                        ],
                        cwd=str(cwd),
                    ),
                )
            )
            servers.append(
                (
                    "toolfold mcp --store memory: --sandbox off",
                    StdioServerParameters(
                        command=sys.executable,
                        args=["-m", "toolfold.cli", "mcp", "--store", "memory:", *off],
                        cwd=str(cwd),
                    ),
                )
            )
            if before is not None:
                servers.append(
                    (
                        "toolfold mcp --sandbox off, before",
                        StdioServerParameters(
                            command=sys.executable,
                            args=[
                                "-m",
                                "toolfold.cli",
                                "mcp",
                                "--store",
                                f"sqlite:{cwd / 'ub.db'}",
                                *off,
                            ],
                            cwd=str(cwd),
                            env={**os.environ, "PYTHONPATH": before},
                        ),
                    )
                )
                servers.append(
                    (
                        "toolfold mcp --store memory: --sandbox off, before",
                        StdioServerParameters(
                            command=sys.executable,
                            args=["-m", "toolfold.cli", "mcp", "--store", "memory:", *off],
                            cwd=str(cwd),
                            env={**os.environ, "PYTHONPATH": before},
                        ),
                    )
                )
        async with AsyncExitStack() as stack:
            measured = [await measure(name, params, command, stack) for name, params in servers]
            trues: list[list[float]] = [[] for _ in measured]
            ticks = [cpu_ticks(row["pid"]) for row, _ in measured]
            for _ in range(calls):
                for (_, client), times in zip(measured, trues, strict=True):
                    t0 = time.perf_counter()
                    await client.call_tool("bash", {"command": "true"})
                    times.append(time.perf_counter() - t0)
            rows = [row for row, _ in measured]
            hz = os.sysconf("SC_CLK_TCK")
            for row, t0 in zip(rows, ticks, strict=True):
                row["cpu_ms"] = (cpu_ticks(row["pid"]) - t0) / hz / calls * 1000
            for row, times in zip(rows, trues, strict=True):
                row["true_ms"] = statistics.median(times) * 1000
                row["true_p90"] = sorted(times)[int(0.9 * (len(times) - 1))] * 1000
            return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=100, help="output size of the big command, MB")
    parser.add_argument("--true-calls", type=int, default=20)
    parser.add_argument("--before", help="another source tree's src/ for a 'before' row")
    parser.add_argument("--memory", action="store_true", help="add a --store memory: row")
    parser.add_argument(
        "--unconfined",
        action="store_true",
        help="add --sandbox off rows, and the plain server with its commands in bubblewrap",
    )
    args = parser.parse_args()
    rows = anyio.run(run, args.mb, args.true_calls, args.before, args.memory, args.unconfined)
    base = rows[0]
    print(f"command: `{big_command(args.mb)}` ({args.mb * 10**6:,} bytes of output)\n")
    print(
        "| server | bytes to client | progress msgs | first progress | total | peak RSS "
        "| `true` round trip (median) | p90 | vs subprocess.run | server CPU per `true` |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        first = f"{row['first_progress']:.2f} s" if row["first_progress"] is not None else "never"
        print(
            f"| {row['server']} | {row['bytes']:,} | {row['progress']} | {first} | "
            f"{row['total']:.2f} s | {row['rss'] / 2**20:.0f} MiB | {row['true_ms']:.1f} ms | "
            f"{row['true_p90']:.1f} ms | {row['true_ms'] / base['true_ms']:.2f}x | "
            f"{row['cpu_ms']:.1f} ms |"
        )
    tf = rows[1]
    by_name = {row["server"]: row for row in rows}
    pairs = [
        ("toolfold mcp", "subprocess.run server, durable (SQLite FULL)"),
        ("toolfold mcp", "subprocess.run server in bubblewrap, durable (SQLite FULL)"),
        ("toolfold mcp --sandbox off", "subprocess.run server, durable (SQLite FULL)"),
    ]
    for ours, plain in pairs:
        if ours in by_name and plain in by_name:
            print(
                f"\n`true` {ours} / {plain}: "
                f"{by_name[ours]['true_ms'] / by_name[plain]['true_ms']:.2f}x"
            )
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    print(
        f"\nratios toolfold / subprocess.run: bytes {tf['bytes'] / base['bytes']:.5f}, "
        f"peak RSS {tf['rss'] / base['rss']:.2f}, total time {tf['total'] / base['total']:.2f}, "
        f"`true` {tf['true_ms'] / base['true_ms']:.2f}"
    )


if __name__ == "__main__":
    main()
