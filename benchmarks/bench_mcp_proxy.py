"""``toolfold mcp proxy`` in front of ``mcp-server-git``: what reaches the client, direct
against through the proxy, on the same calls.

    .venv/bin/python benchmarks/bench_mcp_proxy.py [--commits 60000] [--small-calls 50]

Needs ``mcp-server-git`` in ``.venv/mcp-upstreams/git`` (the proxy tests install it
there; or: python3 -m venv .venv/mcp-upstreams/git && .venv/mcp-upstreams/git/bin/pip
install mcp-server-git). Reported:

- bytes reaching the client for one ``git_log`` of a generated repository (about
  10 MB of log text): the JSON of the result as the client re-serializes it;
- the proxy's added latency for a small call (``git_status``): p50 and p99 of the
  round trip, direct and through the proxy;
- the proxy's peak RSS (``VmHWM``), read from /proc before it is stopped.

Not measured: tokens (bytes are the proxy-independent measure; a tokenizer would
scale both columns alike), the model's behaviour, or the upstream's own memory.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
import uuid
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


def peak_rss(marker: str) -> int:
    """VmHWM of the process whose command line holds ``marker``."""
    for proc in Path("/proc").iterdir():
        try:
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(
    params: StdioServerParameters, repo: Path, commits: int, small: int, marker: str | None
) -> dict[str, Any]:
    async with (
        stdio_client(params, errlog=open("/dev/null", "w")) as (r, w),
        ClientSession(r, w) as client,
    ):
        await client.initialize()
        await client.list_tools()
        t0 = time.perf_counter()
        log = await client.call_tool("git_log", {"repo_path": str(repo), "max_count": commits})
        log_time = time.perf_counter() - t0
        size = len(log.model_dump_json(by_alias=True, exclude_none=True))
        trips = []
        for _ in range(small):
            t0 = time.perf_counter()
            await client.call_tool("git_status", {"repo_path": str(repo)})
            trips.append((time.perf_counter() - t0) * 1000)
        rss = peak_rss(marker) if marker else 0
    return {
        "bytes": size,
        "log_time": log_time,
        "p50": statistics.median(trips),
        "p99": pct(trips, 0.99),
        "rss": rss,
    }


async def run(commits: int, small: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
        repo = Path(tmp) / "repo"
        make_repo(repo, commits)
        raw = subprocess.run(
            ["git", "-C", str(repo), "log", "--oneline"], capture_output=True, check=True
        )
        direct = StdioServerParameters(command=str(GIT_SERVER), cwd=tmp)
        session = f"bench-{uuid.uuid4().hex[:8]}"
        proxied = StdioServerParameters(
            command=str(ROOT / ".venv" / "bin" / "python"),
            args=[
                "-m",
                "toolfold.cli",
                "mcp",
                "proxy",
                "--store",
                f"sqlite:{tmp}/store.db",
                "--session",
                session,
                "--",
                str(GIT_SERVER),
            ],
            cwd=tmp,
        )
        a = await measure(direct, repo, commits, small, None)
        b = await measure(proxied, repo, commits, small, session)
    print(
        f"repository: {commits:,} commits (`git log --oneline`: {len(raw.stdout):,} bytes); "
        f"{small} `git_status` calls\n"
    )
    print(
        "| path | bytes to client for `git_log` | `git_log` time | `git_status` p50 | p99 | peak RSS of the proxy |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    print(
        f"| direct | {a['bytes']:,} | {a['log_time']:.2f} s | {a['p50']:.1f} ms | {a['p99']:.1f} ms | — |"
    )
    print(
        f"| through `toolfold mcp proxy` | {b['bytes']:,} | {b['log_time']:.2f} s | {b['p50']:.1f} ms | "
        f"{b['p99']:.1f} ms | {b['rss'] / 2**20:.0f} MiB |"
    )
    print(
        f"\nbytes ratio proxy/direct {b['bytes'] / a['bytes']:.4f}; added latency p50 "
        f"{b['p50'] - a['p50']:+.1f} ms, p99 {b['p99'] - a['p99']:+.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=60_000)
    parser.add_argument("--small-calls", type=int, default=50)
    args = parser.parse_args()
    if not GIT_SERVER.exists():
        raise SystemExit(f"{GIT_SERVER} is missing; see this script's docstring to install it")
    anyio.run(run, args.commits, args.small_calls)


if __name__ == "__main__":
    main()
