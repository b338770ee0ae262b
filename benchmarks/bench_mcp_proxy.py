"""``toolfold mcp proxy`` in front of ``mcp-server-git``: what reaches the client, direct
against through the proxy, on the same calls.

    .venv/bin/python benchmarks/bench_mcp_proxy.py [--commits 60000] [--small-calls 50]
        [--before SRC]

Needs ``mcp-server-git`` in ``.venv/mcp-upstreams/git`` (the proxy tests install it
there; or: python3 -m venv .venv/mcp-upstreams/git && .venv/mcp-upstreams/git/bin/pip
install mcp-server-git). Reported:

- bytes reaching the client for one ``git_log`` of a generated repository (about
  10 MB of log text): the JSON of the result as the client re-serializes it;
- the proxy's added latency for a small call (``git_status``): p50 and p99 of the
  round trip, direct and through the proxy. The clients stay connected and take turns,
  one call each per round, so a change in the machine's load hits every row alike;
  ``--before SRC`` adds a proxy run from another source tree (``git archive <commit>
  src | tar -x -C /tmp/before``, then ``--before /tmp/before/src``), ``--memory`` the
  proxy on ``--store memory:`` (no flushes: the gap to the SQLite row is the store's;
  with ``--before``, for both trees);
- the proxy's CPU per small call (user + system of its process and threads, not of
  its upstream, from /proc over the ``git_status`` calls);
- the proxy's peak RSS (``VmHWM``), read from /proc before it is stopped;
- the same for ``mcp_naive_proxy.py``, the smallest proxy on the same SDK (it forwards
  each call unchanged): the floor of an extra stdio hop, which toolfold's proxy pays
  too; and for ``mcp_naive_proxy.py --durable``, which also commits a start row before
  it forwards a call and a result row before it answers (SQLite, every commit
  flushed): the floor of a durable proxy, against the default SQLite row.

Not measured: tokens (bytes are the proxy-independent measure; a tokenizer would
scale both columns alike), the model's behaviour, or the upstream's own memory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
GIT_SERVER = ROOT / ".venv" / "mcp-upstreams" / "git" / "bin" / "mcp-server-git"


def make_repo(path: Path, commits: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    parts = []
    for i in range(commits):
        message = f"commit number {i}: adjust the frobnicator\n"
        parts.append(
            f"commit refs/heads/main\ncommitter Dev <dev@example.com> {1_700_000_000 + i} +0000\n"
            f"data {len(message)}\n{message}\n"
        )
    subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=path, input="".join(parts).encode(), check=True
    )


def find_pid(marker: str) -> int | None:
    """The process whose command line holds ``marker`` (the proxy, not its upstream)."""
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker in (proc / "cmdline").read_bytes().decode(
                errors="replace"
            ):
                return int(proc.name)
        except OSError:
            continue
    return None


def peak_rss(marker: str) -> int:
    """VmHWM of the process whose command line holds ``marker``."""
    pid = find_pid(marker)
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU of ``pid`` and its threads so far (not its children's)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def connect(params: StdioServerParameters, stack: AsyncExitStack) -> ClientSession:
    errlog = stack.enter_context(Path(os.devnull).open("w"))  # noqa: SIM115 (the stack closes it)
    r, w = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    client = await stack.enter_async_context(ClientSession(r, w))
    await client.initialize()
    await client.list_tools()
    return client


async def big_call(client: ClientSession, repo: Path, commits: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    log = await client.call_tool("git_log", {"repo_path": str(repo), "max_count": commits})
    return len(log.model_dump_json(by_alias=True, exclude_none=True)), time.perf_counter() - t0


def proxy_params(
    tmp: str, session: str, src: str | None, store: str | None = None
) -> StdioServerParameters:
    env = {**os.environ, "PYTHONPATH": src} if src is not None else None
    return StdioServerParameters(
        command=str(ROOT / ".venv" / "bin" / "python"),
        args=[
            "-m",
            "toolfold.cli",
            "mcp",
            "proxy",
            "--store",
            store or f"sqlite:{tmp}/{session}.db",
            "--session",
            session,
            "--",
            str(GIT_SERVER),
        ],
        cwd=tmp,
        env=env,
    )


async def run(commits: int, small: int, before: str | None, memory: bool) -> None:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, commits)
        raw = subprocess.run(
            ["git", "-C", str(repo), "log", "--oneline"], capture_output=True, check=True
        )
        session = f"bench-{uuid.uuid4().hex[:8]}"
        naive = StdioServerParameters(
            command=str(ROOT / ".venv" / "bin" / "python"),
            args=[str(ROOT / "benchmarks" / "mcp_naive_proxy.py"), str(GIT_SERVER)],
            cwd=tmp,
        )
        durable = StdioServerParameters(
            command=str(ROOT / ".venv" / "bin" / "python"),
            args=[
                str(ROOT / "benchmarks" / "mcp_naive_proxy.py"),
                "--durable",
                f"{tmp}/naive-journal.db",
                str(GIT_SERVER),
            ],
            cwd=tmp,
        )
        paths: list[tuple[str, StdioServerParameters, str | None]] = [
            ("direct", StdioServerParameters(command=str(GIT_SERVER), cwd=tmp), None),
            ("through `toolfold mcp proxy`", proxy_params(tmp, session, None), session),
            (
                "through a pass-through SDK proxy (the floor)",
                naive,
                f"mcp_naive_proxy.py\0{GIT_SERVER}",  # not the --durable one
            ),
            (
                "through a pass-through SDK proxy, durable (SQLite FULL, 2 flushed commits)",
                durable,
                "naive-journal.db",
            ),
        ]
        if memory:
            paths.append(
                (
                    "through `toolfold mcp proxy --store memory:`",
                    proxy_params(tmp, f"{session}-mem", None, "memory:"),
                    f"{session}-mem",
                )
            )
        if before is not None:
            old = f"{session}-before"
            paths.append(("through the proxy, before", proxy_params(tmp, old, before), old))
            if memory:
                old_mem = f"{session}-before-mem"
                paths.append(
                    (
                        "through the proxy `--store memory:`, before",
                        proxy_params(tmp, old_mem, before, "memory:"),
                        old_mem,
                    )
                )
        rows: list[dict[str, Any]] = []
        async with AsyncExitStack() as stack:
            clients = []
            for name, params, marker in paths:
                client = await connect(params, stack)
                size, log_time = await big_call(client, repo, commits)
                rows.append({"path": name, "bytes": size, "log_time": log_time, "trips": []})
                clients.append((client, marker))
            pids = [find_pid(marker) if marker else None for _, marker in clients]
            cpu0 = [cpu_seconds(pid) for pid in pids]
            for _ in range(small):
                for (client, _), row in zip(clients, rows, strict=True):
                    t0 = time.perf_counter()
                    await client.call_tool("git_status", {"repo_path": str(repo)})
                    row["trips"].append((time.perf_counter() - t0) * 1000)
            for pid, start, row in zip(pids, cpu0, rows, strict=True):
                row["cpu"] = (cpu_seconds(pid) - start) / small * 1000 if pid else None
            for (_, marker), row in zip(clients, rows, strict=True):
                row["rss"] = peak_rss(marker) if marker else 0
    print(
        f"repository: {commits:,} commits (`git log --oneline`: {len(raw.stdout):,} bytes); "
        f"{small} `git_status` calls per path, interleaved; load average "
        f"{load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end\n"
    )
    print(
        "| path | bytes to client for `git_log` | `git_log` time | `git_status` p50 | p99 "
        "| added p50 | added p99 | proxy CPU per call | peak RSS of the proxy |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    direct = rows[0]
    d50, d99 = statistics.median(direct["trips"]), pct(direct["trips"], 0.99)
    for row in rows:
        p50, p99 = statistics.median(row["trips"]), pct(row["trips"], 0.99)
        added = "—" if row is direct else f"{p50 - d50:+.1f} ms"
        added99 = "—" if row is direct else f"{p99 - d99:+.1f} ms"
        rss = "—" if row is direct else f"{row['rss'] / 2**20:.0f} MiB"
        cpu = "—" if row["cpu"] is None else f"{row['cpu']:.2f} ms"
        print(
            f"| {row['path']} | {row['bytes']:,} | {row['log_time']:.2f} s | {p50:.1f} ms "
            f"| {p99:.1f} ms | {added} | {added99} | {cpu} | {rss} |"
        )
    print(f"\nbytes ratio proxy/direct {rows[1]['bytes'] / direct['bytes']:.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=60_000)
    parser.add_argument("--small-calls", type=int, default=50)
    parser.add_argument("--before", help="another source tree's src/ for a 'before' row")
    parser.add_argument(
        "--memory",
        action="store_true",
        help="add the proxy with --store memory: (no flushes: what the store's cost is)",
    )
    args = parser.parse_args()
    if not GIT_SERVER.exists():
        raise SystemExit(f"{GIT_SERVER} is missing; see this script's docstring to install it")
    anyio.run(run, args.commits, args.small_calls, args.before, args.memory)


if __name__ == "__main__":
    main()
