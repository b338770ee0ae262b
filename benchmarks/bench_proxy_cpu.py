"""The proxy's CPU per small call, per thread, one proxy at a time and trees alternated.

    .venv/bin/python benchmarks/bench_proxy_cpu.py [--calls 400] [--rounds 4]
        [--before SRC] [--gap SECONDS]

``bench_mcp_proxy.py`` reads a proxy's CPU from /proc ticks (10 ms) while six proxies
take turns; this script measures the one thing it reports more finely: each proxy
process runs alone (its upstream ``mcp-server-git`` beside it), makes ``--calls``
``git_status`` calls after 20 to warm up, and its CPU is read from each thread's
``/proc/PID/task/TID/schedstat`` (nanoseconds of run time) before and after. Rows, in
turn each round: the pass-through SDK proxy (``mcp_naive_proxy.py``), the same made
durable the least way (``--durable``: two flushed SQLite commits a call),
``toolfold mcp proxy`` on SQLite and on ``--store memory:``, and with ``--before SRC``
both again from another source tree (``git archive <commit> src | tar -x -C
/tmp/before``). Printed per row: medians over the rounds of the round trip and of the
CPU per call, all threads and split into the event loop's thread and the others (the
SQLite worker; the SDK's stdio threads in the pass-through proxies).

``--gap`` waits that long between two calls (the client's think time): the proxy's
threads then sleep between calls, as under a real client, and every wake-up is paid.

Not measured: the upstream's and the client's CPU, concurrent calls, large results.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import StdioServerParameters

from bench_mcp_proxy import GIT_SERVER, ROOT, connect, find_pid, make_repo, proxy_params


def thread_cpu(pid: int) -> dict[int, int]:
    """Nanoseconds each thread of ``pid`` has run so far."""
    out: dict[int, int] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return out


async def measure(
    params: StdioServerParameters, marker: str, repo: Path, calls: int, gap: float
) -> dict[str, float]:
    async with AsyncExitStack() as stack:
        client = await connect(params, stack)
        for _ in range(20):
            await client.call_tool("git_status", {"repo_path": str(repo)})
        pid = find_pid(marker)
        assert pid is not None, marker
        before = thread_cpu(pid)
        trips = []
        for _ in range(calls):
            t0 = time.perf_counter()
            await client.call_tool("git_status", {"repo_path": str(repo)})
            trips.append(time.perf_counter() - t0)
            if gap:
                await anyio.sleep(gap)
        after = thread_cpu(pid)
    spent = {tid: ns - before.get(tid, 0) for tid, ns in after.items()}
    loop = spent.get(pid, 0)
    return {
        "trip": statistics.median(trips) * 1000,
        "cpu": sum(spent.values()) / calls / 1e6,
        "loop": loop / calls / 1e6,
        "others": (sum(spent.values()) - loop) / calls / 1e6,
    }


async def run(calls: int, rounds: int, before: str | None, gap: float) -> None:
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-proxy-cpu-") as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, 200)
        python = str(ROOT / ".venv" / "bin" / "python")
        naive = str(ROOT / "benchmarks" / "mcp_naive_proxy.py")
        rows: list[tuple[str, Any]] = [
            (
                "pass-through SDK proxy",
                lambda tag: (
                    # The tag in a warning filter that matches nothing: a mark on the
                    # command line to find the process by.
                    StdioServerParameters(
                        command=python,
                        args=["-W", f"default:::{tag}", naive, str(GIT_SERVER)],
                        cwd=tmp,
                    ),
                    tag,
                ),
            ),
            (
                "pass-through SDK proxy, durable (2 flushed commits)",
                lambda tag: (
                    StdioServerParameters(
                        command=python,
                        args=[naive, "--durable", f"{tmp}/{tag}.db", str(GIT_SERVER)],
                        cwd=tmp,
                    ),
                    tag,
                ),
            ),
        ]
        trees = [("", None)] + ([(", before", before)] if before else [])
        for suffix, src in trees:
            rows.append(
                (
                    f"`toolfold mcp proxy` (SQLite){suffix}",
                    lambda tag, src=src: (proxy_params(tmp, tag, src), tag),
                )
            )
            rows.append(
                (
                    f"`toolfold mcp proxy --store memory:`{suffix}",
                    lambda tag, src=src: (proxy_params(tmp, tag, src, "memory:"), tag),
                )
            )
        results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in rows}
        for _ in range(rounds):
            for name, make in rows:
                params, marker = make(f"cpu-{uuid.uuid4().hex[:10]}")
                results[name].append(await measure(params, marker, repo, calls, gap))
    print(
        f"{calls} `git_status` calls per proxy and round, {rounds} rounds (rows alternated), "
        f"gap {gap * 1000:g} ms between calls; load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end\n"
    )
    print("| proxy | round trip | CPU per call | event loop's thread | other threads |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, got in results.items():

        def med(key: str, got: list[dict[str, float]] = got) -> float:
            return statistics.median(r[key] for r in got)

        spread = f"{min(r['cpu'] for r in got):.2f}-{max(r['cpu'] for r in got):.2f}"
        print(
            f"| {name} | {med('trip'):.2f} ms | {med('cpu'):.2f} ms ({spread}) "
            f"| {med('loop'):.2f} ms | {med('others'):.2f} ms |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--before", help="another source tree's src/ for 'before' rows")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds between two calls")
    args = parser.parse_args()
    anyio.run(run, args.calls, args.rounds, args.before, args.gap)


if __name__ == "__main__":
    main()
