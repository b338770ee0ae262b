"""The viewer's landing page with 10 and 10,000 sessions, and the spill route in the
middle of a 1 GB file, each against what a user would otherwise do.

    .venv/bin/python benchmarks/bench_viewer.py [--sessions 10,10000] [--spill-mb 1024]

Landing: one SQLite store per size, each session holding one settled ``bash`` call
(stored as ``toolfold run`` stores it: the ``ToolResultMessage`` and its run record)
and a spill directory whose modification time spreads the sessions over a day. One
``toolfold serve`` per store. Measured: ``GET /v1/overview`` (first page of 25, median
of 5), the time headless Chromium takes from navigation to the first session row
drawn (median of 3), and the alternative a page built on the older API had: ``GET
/v1/sessions`` and then each session's ``/calls?limit=1`` to learn its last call and
its activity (once).

Spill: a file of ``--spill-mb`` MB of 32-byte numbered lines as one session's spill,
read through ``GET .../output``: the line page (500 lines) at the middle, cold (the
line index is built up to there) and warm (median of 5, other lines near the middle),
and a 64 KiB byte page at the middle (median of 5); beside it ``sed -n`` printing the
same 500 lines and ``tail -c +N | head -c 65536`` (median of 3). Everything reads from
the page cache after the file was written (the machine has the RAM): this measures
CPU work per request, not a cold disk. The server's peak RSS (VmHWM) is reported.

Not measured: JSONL and PostgreSQL stores (their ``list_sessions`` differs), sessions
with many calls (the page reads a bounded number of records per session, see
docs/replication.md), a cold disk.
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
from typing import Any

import httpx

from toolfold.durability import settle_writes
from toolfold.history import new_run_record, run_record_address, settled_record
from toolfold.storage import FsyncPolicy, open_repository, set_value

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]
CHROMIUM = "/usr/bin/chromium"
LINE = 32


async def build(home: Path, sessions: int, spill_name: str | None, spill_file: Path | None) -> None:
    """``sessions`` sessions of one settled call each, with spill directories."""
    now = time.time()
    url = f"sqlite:{home / 'toolfold.db'}"
    async with open_repository(url, fsync=FsyncPolicy("none", "none")) as repo:
        for i in range(sessions):
            name = f"s{i:05d}"
            spill = home / "spill" / name
            spill.mkdir(parents=True, mode=0o700, exist_ok=True)
            os.chmod(spill, 0o700)
            age = 86400 * i / max(1, sessions)
            os.utime(spill, (now - age, now - age))
            session = await repo.open_session(name, create=True)
            cid = f"call-{i:06d}"
            record = new_run_record(f"make test-{i}", str(spill), "2026-01-01T00:00:00+00:00")
            message = {
                "role": "tool_result",
                "tool_call_id": cid,
                "tool_name": "bash",
                "content": [{"type": "text", "text": f"test {i} passed\n"}],
                "details": {"exit_code": 0},
                "is_error": False,
                "outcome": "ok",
            }
            state: dict[str, Any] = {}
            if name == spill_name and spill_file is not None:
                state["spill_path"] = str(spill_file)
            await session.commit([set_value(run_record_address(cid), record)])
            await session.commit(settle_writes(message))
            await session.commit([settled_record(cid, record, state)])
            await session.close()


def write_spill(path: Path, megabytes: int) -> int:
    """Numbered 32-byte lines, ``megabytes`` MB; returns the line count."""
    lines = megabytes * 1024 * 1024 // LINE
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with path.open("wb") as f:
        step = 262_144
        for start in range(1, lines + 1, step):
            end = min(lines + 1, start + step)
            f.write("".join(f"{i:015d} of the spill file\n" for i in range(start, end)).encode())
    return lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    def __init__(self, home: Path) -> None:
        self.port = free_port()
        self.token = secrets.token_urlsafe(32)
        self.auth = {"Authorization": f"Bearer {self.token}"}
        self.base = f"http://127.0.0.1:{self.port}"
        # One client: making one costs ~150 ms (its TLS context), more than a request.
        self.client = httpx.Client(base_url=self.base, headers=self.auth, timeout=600)
        self.proc = subprocess.Popen(
            [
                *TOOLFOLD,
                "serve",
                "--port",
                str(self.port),
                "--store",
                f"sqlite:{home / 'toolfold.db'}",
                "--token",
                self.token,
            ],
            cwd=home,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(300):  # bounded: at most ~30 s for the server to answer
            try:
                if self.client.get("/v1/lanes", timeout=2).is_success:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise SystemExit("toolfold serve never answered")

    def get(self, path: str, **params: Any) -> tuple[float, httpx.Response]:
        start = time.perf_counter()
        r = self.client.get(path, params=params)
        elapsed = time.perf_counter() - start
        if not r.is_success:
            raise SystemExit(f"GET {path} {params}: {r.status_code} {r.text[:300]}")
        return elapsed, r

    def hwm_mb(self) -> float:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return next(int(x.split()[1]) for x in status.splitlines() if x.startswith("VmHWM")) / 1024

    def stop(self) -> None:
        self.client.close()
        self.proc.kill()
        self.proc.wait()


def first_render(served: Served, runs: int = 3) -> float:
    from playwright.sync_api import sync_playwright

    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{served.base}/?token={served.token}")  # trades the token for the cookie
        page.wait_for_selector("#overview-list li[data-kind=session]")
        page.close()
        for _ in range(runs):
            page = context.new_page()
            start = time.perf_counter()
            page.goto(f"{served.base}/#/")
            page.wait_for_selector("#overview-list li[data-kind=session]")
            times.append(time.perf_counter() - start)
            page.close()
        browser.close()
    return statistics.median(times)


def landing(n: int, tmp: Path, naive_sweep: bool = True) -> dict[str, float]:
    home = tmp / f"landing-{n}"
    home.mkdir()
    start = time.perf_counter()
    asyncio.run(build(home, n, None, None))
    print(f"  built {n} sessions in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    served = Served(home)
    try:
        api = statistics.median(served.get("/v1/overview", limit=25)[0] for _ in range(5))
        page = first_render(served)
        naive = float("nan")
        if naive_sweep:
            start = time.perf_counter()
            _, r = served.get("/v1/sessions")
            for name in r.json()["sessions"]:
                served.get(f"/v1/sessions/{name}/calls", limit=1)
            naive = time.perf_counter() - start
        return {"api": api, "page": page, "naive": naive, "rss": served.hwm_mb()}
    finally:
        served.stop()


def run_median(cmd: str, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(["sh", "-c", cmd], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def spill(megabytes: int, tmp: Path) -> dict[str, float]:
    home = tmp / "spill-home"
    home.mkdir()
    file = home / "spill" / "s00000" / "exec-bench.log"
    start = time.perf_counter()
    lines = write_spill(file, megabytes)
    print(f"  wrote {megabytes} MB in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    asyncio.run(build(home, 1, "s00000", file))
    served = Served(home)
    mid = lines // 2
    url = "/v1/sessions/s00000/calls/call-000000/output"
    try:
        cold, r = served.get(url, line=mid, lines=500)
        assert r.json()["lines"][0] == f"{mid:015d} of the spill file", r.json()["lines"][:1]
        warm = statistics.median(
            served.get(url, line=mid + 1000 * k, lines=500)[0] for k in range(1, 6)
        )
        offset = megabytes * 1024 * 1024 // 2
        byte_page = statistics.median(
            served.get(url, offset=offset + 4096 * k, length=65536)[0] for k in range(5)
        )
        sed = run_median(f"sed -n '{mid},{mid + 499}p;{mid + 499}q' {file}")
        tail = run_median(f"tail -c +{offset + 1} {file} | head -c 65536")
        return {
            "cold": cold,
            "warm": warm,
            "bytes": byte_page,
            "sed": sed,
            "tail": tail,
            "rss": served.hwm_mb(),
            "lines": lines,
        }
    finally:
        served.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", default="10,10000")
    parser.add_argument("--spill-mb", type=int, default=1024, help="0: no spill part")
    parser.add_argument(
        "--no-naive", action="store_true", help="skip the every-session sweep (minutes at 10k)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-viewer-") as name:
        tmp = Path(name)
        print(
            "| sessions | GET /v1/overview (page of 25) | Chromium: navigation → first row "
            "| list + every session's calls (older API) | server peak RSS |"
        )
        print("|---|---|---|---|---|")
        for n in (int(x) for x in args.sessions.split(",")):
            f = landing(n, tmp, not args.no_naive)
            sweep = (
                "skipped"
                if f["naive"] != f["naive"]  # NaN: --no-naive
                else f"{f['naive'] * 1000:.0f} ms ({f['naive'] / f['api']:.0f}x the page)"
            )
            print(
                f"| {n:,} | {f['api'] * 1000:.1f} ms | {f['page'] * 1000:.0f} ms "
                f"| {sweep} | {f['rss']:.0f} MB |",
                flush=True,
            )
        if not args.spill_mb:
            return
        s = spill(args.spill_mb, tmp)
        print()
        print(
            f"Spill file: {args.spill_mb} MB, {s['lines']:,} lines; middle line {s['lines'] // 2:,}"
        )
        print()
        print("| read | route | alternative | ratio |")
        print("|---|---|---|---|")
        print(
            f"| 500 lines at the middle, first request (index built) | {s['cold'] * 1000:.0f} ms "
            f"| `sed -n` {s['sed'] * 1000:.0f} ms | {s['sed'] / s['cold']:.2f}x |"
        )
        print(
            f"| 500 lines near the middle, index warm | {s['warm'] * 1000:.1f} ms "
            f"| `sed -n` {s['sed'] * 1000:.0f} ms | {s['sed'] / s['warm']:.0f}x |"
        )
        print(
            f"| 64 KiB at the middle byte | {s['bytes'] * 1000:.1f} ms "
            f"| `tail -c \\| head -c` {s['tail'] * 1000:.1f} ms | {s['tail'] / s['bytes']:.1f}x |"
        )
        print(f"\nserver peak RSS after the spill reads: {s['rss']:.0f} MB")


if __name__ == "__main__":
    main()
