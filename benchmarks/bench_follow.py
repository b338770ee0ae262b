"""Live stored sessions: how soon a commit reaches a lane subscriber of ``toolfold serve``,
and what following idle sessions costs, with the change signal against polling.

Run: .venv/bin/python benchmarks/bench_follow.py [--samples 60] [--sessions 50]
     [--seconds 5] [--backends sqlite,jsonl,postgresql]
     .venv/bin/python benchmarks/bench_follow.py --e2e [--lines 20] [--every 0.3]

Default: per backend, ``toolfold serve`` in its own process twice, side by side: with
the followers' old loop ("polling": read each followed session every 0.25 s, put back
by this script) and as shipped ("signal": each follower sleeps on
``Repository.wait_for_change``). This process runs a durable call that writes one line
at random gaps and checkpoints at once, plus one SSE subscriber of the lane; the
latency is from the checkpoint's ``commit()`` returning to the line appearing in the
subscriber's replica. Idle CPU is serve's user+system time while it follows
``--sessions`` sessions nobody writes, each with one SSE subscriber. PostgreSQL runs
on a throwaway cluster (or ``TOOLFOLD_TEST_POSTGRES_DSN``).

``--e2e``: two real processes on one SQLite store, ``toolfold serve`` and ``toolfold
run --session live`` whose command prints its wall-clock time every ``--every``
seconds; the latency is the moment the line reaches the subscriber minus the time
printed in it (the run's checkpoint pacing, at most 1 s, dominates it).

Not measured: the database server's CPU, many writers, a follower on another host.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from toolfold.chord import Decoder, apply  # noqa: E402

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLFOLD_STORE", "TOOLFOLD_TOKEN")}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.Popen(
        [*TOOLFOLD, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait(probe: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def end_to_end(args: argparse.Namespace) -> None:
    token = secrets.token_urlsafe(24)
    auth = {"Authorization": f"Bearer {token}"}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        url = f"sqlite:{cwd / 'toolfold.db'}"
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        procs = [_start(["serve", "--port", str(port), "--store", url, "--token", token], cwd)]
        try:

            def answering() -> bool:
                try:
                    return httpx.get(f"{base}/v1/sessions", headers=auth, timeout=2).is_success
                except httpx.TransportError:
                    return False

            _wait(answering, "the server")
            command = (
                f"for i in $(seq 1 {args.lines}); do echo line-$i $(date +%s.%N); "
                f"sleep {args.every}; done"
            )
            procs.append(_start(["run", "--store", url, "--session", "live", "--", command], cwd))

            def listed() -> bool:
                body = httpx.get(f"{base}/v1/sessions", headers=auth, timeout=2).json()
                return "live" in body["sessions"]

            _wait(listed, "the session")
            latencies: dict[str, float] = {}
            decoder, value = Decoder(), None
            with (
                httpx.Client(base_url=base, headers=auth) as client,
                client.stream("GET", "/v1/lanes/live/state", timeout=30) as response,
            ):
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    value = apply(value, decoder.decode(json.loads(line[6:])))
                    now = time.time()
                    for call in (value or {}).get("tools", {}).values():
                        text = (call.get("output") or {}).get("content", [{}])[0].get("text", "")
                        for row in text.splitlines():
                            name, _, stamp = row.partition(" ")
                            if name.startswith("line-") and name not in latencies and stamp:
                                latencies[name] = now - float(stamp)
                    if len(latencies) >= args.lines:
                        break
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    values = sorted(latencies.values())
    print("## Live stored session: print in `toolfold run` → seen by a lane subscriber\n")
    print("| lines | every | median | p90 | max |")
    print("|---:|---:|---:|---:|---:|")
    p90 = values[int(0.9 * (len(values) - 1))]
    print(
        f"| {len(values)} | {args.every:g} s | {statistics.median(values):.2f} s | "
        f"{p90:.2f} s | {values[-1]:.2f} s |"
    )


# -- commit-to-lane latency and idle CPU: the change signal against the old polling --------


async def _polling_follow(self: Any, name: str, host: Any) -> None:
    """The follower as it was before the change signal: read the session every 0.25 s
    (with the JSONL reader refresh, so JSONL can be compared at all)."""
    import asyncio

    from toolfold.history import SessionFollower

    session = await self.pool.repository.open_session(name, read_only=True)
    idle = 0
    try:
        follower = SessionFollower(session, name)
        while not host.closed:
            await session.refresh()
            for event in await follower.poll():
                host.handle(event)
            idle = idle + 1 if host.subscribers == 0 else 0
            if idle >= 40:
                return
            await asyncio.sleep(0.25)
    finally:
        await session.close()


def _as_serve(mode: str, argv: list[str]) -> None:
    """Run ``toolfold serve`` in this process, its followers polling or on the signal."""
    if mode == "polling":
        from toolfold.server import _follow

        _follow.Followers._follow = _polling_follow  # type: ignore[method-assign]
    from toolfold.cli import main as cli_main

    cli_main(argv)


def _serve(url: str, cwd: Path, mode: str, token: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLFOLD_STORE", "TOOLFOLD_TOKEN")}
    env["PYTHONPATH"] = str(ROOT / "src")
    args = ["serve", "--port", str(port), "--store", url, "--token", token]
    proc = subprocess.Popen(
        [sys.executable, __file__, "--as-serve", mode, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {token}"}

    def answering() -> bool:
        try:
            return httpx.get(f"{base}/v1/sessions", headers=auth, timeout=2).is_success
        except httpx.TransportError:
            return False

    _wait(answering, "the server")
    return proc, base


def _text(value: Any) -> str:
    for call in (value or {}).get("tools", {}).values():
        text: str = (call.get("output") or {}).get("content", [{}])[0].get("text", "")
        return text
    return ""


async def _latencies(url: str, base: str, token: str, samples: int, seed: int) -> list[float]:
    """Seconds from a checkpoint's commit returning (in this process) to the line it
    carries appearing in an SSE replica of the lane (also this process)."""
    import asyncio
    import bisect
    import random
    import threading

    from pydantic import BaseModel

    from toolfold.harness import Durability, DurableHooks, Harness, ToolCall, tool
    from toolfold.output import OutputPolicy
    from toolfold.storage import open_repository

    rng = random.Random(seed)
    repo = open_repository(url)
    try:
        session = await repo.open_session("live", create=True)
        commits: list[float] = []
        real_commit = session.commit

        async def timed(writes: Any, **kw: Any) -> Any:
            result = await real_commit(writes, **kw)
            commits.append(time.time())
            return result

        session.commit = timed  # type: ignore[method-assign]
        loop = asyncio.get_running_loop()
        gates = [asyncio.Event() for _ in range(samples)]
        written: list[float] = []
        seen: list[float] = []
        opened = threading.Event()

        def read() -> None:
            auth = {"Authorization": f"Bearer {token}"}
            with (
                httpx.Client(base_url=base, headers=auth) as client,
                client.stream("GET", "/v1/lanes/live/state", timeout=60) as response,
            ):
                opened.set()
                decoder, value = Decoder(), None
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    value = apply(value, decoder.decode(json.loads(line[6:])))
                    now, text = time.time(), _text(value)
                    while len(seen) < samples and f"line-{len(seen)}\n" in text:
                        loop.call_soon_threadsafe(gates[len(seen)].set)
                        seen.append(now)
                    if len(seen) >= samples:
                        return

        class _Params(BaseModel):
            pass

        @tool(params=_Params, name="lines", output=OutputPolicy(max_lines=samples + 5))
        async def lines(
            tool_call_id: str, params: _Params, cancel: Any, out: Any, context: Any
        ) -> None:
            """Writes one line, waits until the lane shows it, then the next."""
            for i in range(samples):
                # A random gap, so that commits land anywhere in a poll interval (this
                # is the workload's pacing, not synchronisation: the gate is).
                await asyncio.sleep(rng.uniform(0.02, 0.3))
                written.append(time.time())
                out.write(f"line-{i}\n")
                await gates[i].wait()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        await asyncio.to_thread(opened.wait, 30)
        # Checkpoint at once (interval 0): the figure is the follower's, not the pacing's.
        hooks = DurableHooks(Durability(session, interval=0.0))
        harness = Harness([lines], lane="live", hooks=hooks)
        await asyncio.wait_for(harness.run([ToolCall("c1", "lines", {})], run_id="r1"), 600)
        await asyncio.to_thread(reader.join, 30)
        out = []
        for w, s in zip(written, seen, strict=True):
            first = bisect.bisect_left(commits, w)
            out.append(s - commits[first])
        return out[2:]  # the first two include discovering the run
    finally:
        await repo.close()


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _idle_cpu(url: str, base: str, token: str, pid: int, n: int, seconds: float) -> float:
    """Serve's CPU (% of one core) while following ``n`` sessions nobody writes, each
    with one SSE subscriber."""
    import asyncio

    from toolfold.storage import append_entry, open_repository

    repo = open_repository(url)
    try:
        for i in range(n):
            s = await repo.open_session(f"idle-{i}", create=True)
            await s.commit([append_entry("x")])
            await s.close()
    finally:
        await repo.close()
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=auth, timeout=60) as client:
        started = asyncio.Semaphore(0)

        async def watch(i: int) -> None:
            async with client.stream("GET", f"/v1/lanes/idle-{i}/state") as response:
                async for line in response.aiter_lines():
                    if line.startswith("data: "):
                        started.release()

        tasks = [asyncio.create_task(watch(i)) for i in range(n)]
        for _ in range(n):
            await asyncio.wait_for(started.acquire(), 60)
        await asyncio.sleep(1.0)  # let the followers' first reads finish (not measured)
        before, t0 = _cpu_seconds(pid), time.monotonic()
        await asyncio.sleep(seconds)
        used, wall = _cpu_seconds(pid) - before, time.monotonic() - t0
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return 100 * used / wall


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def compare(args: argparse.Namespace) -> None:
    import asyncio

    cluster = None
    rows = []
    try:
        for backend in args.backends.split(","):
            for mode in ("polling", "signal"):
                with tempfile.TemporaryDirectory() as tmp:
                    cwd = Path(tmp)
                    if backend == "sqlite":
                        url = f"sqlite:{cwd / 'toolfold.db'}"
                    elif backend == "jsonl":
                        url = f"jsonl:{cwd / 'sessions'}"
                    else:
                        if cluster is None:
                            sys.path.insert(0, str(ROOT / "tests"))
                            from pg_fixture import start_cluster

                            cluster = start_cluster(fsync=True)
                        url = _fresh_db(cluster.dsn, f"bench_follow_{mode}")
                    # The store exists before serve starts (SQLite: serve opens it).
                    asyncio.run(_touch(url))
                    token = secrets.token_urlsafe(24)
                    proc, base = _serve(url, cwd, mode, token)
                    try:
                        cpu = asyncio.run(
                            _idle_cpu(url, base, token, proc.pid, args.sessions, args.seconds)
                        )
                        lat = asyncio.run(_latencies(url, base, token, args.samples, seed=1))
                    finally:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                    rows.append((backend, mode, lat, cpu))
                    print(
                        f"  {backend} {mode}: p50 {statistics.median(lat) * 1000:.0f} ms, "
                        f"idle CPU {cpu:.1f} %",
                        file=sys.stderr,
                    )
    finally:
        if cluster is not None:
            cluster.stop()
    print("## Following stored sessions: change signal against polling\n")
    print(
        f"Command: `.venv/bin/python benchmarks/bench_follow.py --samples {args.samples} "
        f"--sessions {args.sessions} --seconds {args.seconds:g} --backends {args.backends}`\n"
    )
    print(
        f"| backend | follower | commit → lane p50 | p99 | idle CPU of serve, "
        f"{args.sessions} followed sessions |"
    )
    print("|---|---|---:|---:|---:|")
    for backend, mode, lat, cpu in rows:
        print(
            f"| {backend} | {mode} | {statistics.median(lat) * 1000:.0f} ms | "
            f"{_pct(lat, 0.99) * 1000:.0f} ms | {cpu:.1f} % |"
        )


async def _touch(url: str) -> None:
    from toolfold.storage import open_repository

    repo = open_repository(url)
    try:
        await repo.list_sessions()
        if url.startswith("sqlite:"):
            s = await repo.open_session("touch", create=True)
            await s.close()
    finally:
        await repo.close()


def _fresh_db(server: str, name: str) -> str:
    import psycopg

    from pg_fixture import with_dbname

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_dbname(server, name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--e2e", action="store_true", help="only the print-to-lane figure")
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--every", type=float, default=0.3)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--backends", default="sqlite,jsonl,postgresql")
    args = parser.parse_args()
    if args.e2e:
        end_to_end(args)
    else:
        compare(args)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--as-serve":
        _as_serve(sys.argv[2], sys.argv[3:])
    else:
        main()
