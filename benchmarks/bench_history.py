"""Reading history: ``toolfold show S 5``, ``toolfold sessions`` and the server's
``GET /v1/sessions/S/calls?limit=100`` on one SQLite session of 1k and of 10k settled
calls. What matters is the ratio 10k / 1k: a read that costs what it returns stays near
1.0x in time and peak memory, one that loads the session grows ~10x.

    .venv/bin/python benchmarks/bench_history.py [--calls 1000,10000] [--size 8192]

Each call is stored as the harness and ``toolfold run`` store it: a settled
``ToolResultMessage`` of ``--size`` bytes of text (default 8 KB, so the 10k session is
~80 MB and builds in well under a minute on a shared machine; the issue's 50 KB would
be 500 MB) plus its run record. The CLI commands run as fresh processes (wall time
and ``ru_maxrss`` of the child, median of 3 runs); the server is one ``toolfold serve``
process, timed over 3 requests, its peak RSS read from ``/proc/PID/status`` (VmHWM).

Not measured: JSONL or PostgreSQL stores, unsettled calls (their recovery reads their
pending output), or the cost of writing the history.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from toolfold.durability import settle_writes
from toolfold.history import new_run_record, run_record_address
from toolfold.storage import FsyncPolicy, open_repository, set_value

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]


async def build(path: Path, calls: int, size: int) -> None:
    """One session ``S`` with ``calls`` settled calls of ``size`` bytes of text."""
    text = ("x" * 79 + "\n") * (size // 80)
    async with open_repository(f"sqlite:{path}", fsync=FsyncPolicy("none", "none")) as repo:
        session = await repo.open_session("S", create=True)
        for i in range(calls):
            cid = f"call-{i:06d}"
            record = new_run_record(f"echo {i}", str(path.parent / "spill"), "2025-01-01")
            message = {
                "role": "tool_result",
                "tool_call_id": cid,
                "tool_name": "bash",
                "content": [{"type": "text", "text": text}],
                "details": {"exit_code": 0},
                "is_error": False,
                "outcome": "ok",
            }
            await session.commit([set_value(run_record_address(cid), record)])
            await session.commit(settle_writes(message))


def run_cli(args: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one CLI process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [*TOOLFOLD, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"toolfold {' '.join(args)} failed with status {proc.returncode}")
    return elapsed, usage.ru_maxrss


def cli_figures(args: list[str]) -> tuple[float, int]:
    runs = [run_cli(args) for _ in range(3)]
    return statistics.median(r[0] for r in runs), max(r[1] for r in runs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_figures(store: str, cwd: Path) -> tuple[float, int]:
    """Median seconds of 3 ``?limit=100`` requests and the server's peak RSS (KiB)."""
    port = free_port()
    token = secrets.token_urlsafe(32)
    auth = {"Authorization": f"Bearer {token}"}
    proc = subprocess.Popen(
        [*TOOLFOLD, "serve", "--port", str(port), "--store", store, "--token", token],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # bounded: at most ~30 s for the server to answer
            try:
                if httpx.get(f"{base}/v1/sessions", headers=auth, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        else:
            raise SystemExit("toolfold serve never answered")
        times = []
        for _ in range(3):
            start = time.perf_counter()
            r = httpx.get(f"{base}/v1/sessions/S/calls?limit=100", headers=auth, timeout=120)
            times.append(time.perf_counter() - start)
            if r.status_code != 200 or len(r.json()["calls"]) != 100:
                raise SystemExit(f"unexpected answer {r.status_code}: {r.text[:200]}")
        status = Path(f"/proc/{proc.pid}/status").read_text()
        hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
        return statistics.median(times), hwm
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", default="1000,10000")
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--build", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build:
        asyncio.run(build(Path(args.build), int(args.calls), args.size))
        return
    counts = [int(c) for c in args.calls.split(",")]
    results: dict[int, dict[str, tuple[float, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-history-") as tmp:
        for n in counts:
            path = Path(tmp) / str(n) / "toolfold.db"
            start = time.perf_counter()
            # In a child: the CLI children are forked from this process, and a parent
            # that had built the session itself would lend them its memory until exec.
            build_args = ["--build", str(path), "--calls", str(n), "--size", str(args.size)]
            subprocess.run([sys.executable, __file__, *build_args], check=True)
            print(
                f"built {n} calls of {args.size} B in {time.perf_counter() - start:.1f} s "
                f"({path.stat().st_size / 1e6:.0f} MB)",
                file=sys.stderr,
            )
            store = f"sqlite:{path}"
            results[n] = {
                "`toolfold show S 5`": cli_figures(["show", "S", "5", "--store", store]),
                "`toolfold sessions`": cli_figures(["sessions", "--store", store]),
                "`GET …/calls?limit=100` (server)": server_figures(store, path.parent),
            }
    lo, hi = counts[0], counts[-1]
    print(f"| read | time {lo} | time {hi} | ratio | peak RSS {lo} | peak RSS {hi} | ratio |")
    print("|---|---|---|---|---|---|---|")
    for what in results[lo]:
        (t0, m0), (t1, m1) = results[lo][what], results[hi][what]
        print(
            f"| {what} | {t0 * 1000:.0f} ms | {t1 * 1000:.0f} ms | {t1 / t0:.2f}x "
            f"| {m0 / 1024:.0f} MB | {m1 / 1024:.0f} MB | {m1 / m0:.2f}x |"
        )


if __name__ == "__main__":
    main()
