"""Many hosts on one PostgreSQL: fenced checkpoint throughput, takeover time, connections.

Run: ``.venv/bin/python benchmarks/bench_pg_hosts.py [--seconds 3] [--takeovers 3]``
(starts a throwaway cluster with fsync on, or uses ``TOOLFOLD_TEST_POSTGRES_DSN``).

- Checkpoints per second with 1, 4 and 16 writer processes, each forcing durable
  checkpoints of its own leased operation (every commit carries the fencing-token
  precondition), side by side with the same writers unleased (what a single-host user
  runs): the ratio is the cost of fencing.
- Takeover: three host processes (tests/durability/host_child.py, lease 1 s, janitor
  every 0.1 s); one is killed with SIGKILL mid-call; the time until another host's
  settlement of that call is visible in the store.
- Connections per host: ``pg_stat_activity`` backends per host process.

Does NOT measure: a network between hosts and the server (everything is on loopback,
on 2 shared cores), NOTIFY fan-out to viewers, or PgBouncer.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

CHILD = ROOT / "tests" / "durability" / "host_child.py"


async def writer(url: str, name: str, seconds: float, leased: bool) -> int:
    """Force checkpoints of one operation's stream for ``seconds``; return how many."""
    from toolfold.chord import track
    from toolfold.durability import CallRecord, Durability, TrackerSource
    from toolfold.storage import open_repository

    async with open_repository(url) as repo:
        session = await repo.open_session(name, create=True)
        d = Durability(session, host=name if leased else None, lease_ttl=10, interval=0)
        op = await d.start_operation("op", "op", [CallRecord("op", "c", "t", "c", {}, "op", "t")])
        out = track({"text": ""})
        inv = op.invocation("c", TrackerSource(out))
        n = 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            out.state["text"] += "x"
            await inv.stream.force()
            n += 1
        if op.lease is not None:
            op.lease.stop_heartbeat()
        return n


def run_writers(url: str, count: int, seconds: float, leased: bool) -> float:
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--writer", url, f"w{count}-{i}-{leased}", str(seconds)]
            + (["--leased"] if leased else []),
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    total = 0
    for p in procs:
        out, _ = p.communicate(timeout=seconds * 10 + 120)
        total += int(out.strip().splitlines()[-1])
    return total / seconds


async def follower(url: str, name: str, count: int) -> None:
    """Subscribe to ``name`` (LISTEN, as ``serve`` does) and print "seq arrival-time"
    for each notification, until ``count`` arrived."""
    from toolfold.storage._postgres import PostgresRepository

    async with PostgresRepository(url) as repo:
        await (await repo.open_session(name, create=True)).close()
        got = 0
        print("LISTENING", flush=True)
        async for seq in repo.changes(name):
            print(f"{seq} {time.time()}", flush=True)
            got += 1
            if got >= count:
                return


async def notify_latency(server: str, followers: int, commits: int) -> tuple[float, float]:
    """p50 and p99 (ms) from a commit returning to each follower process waking up."""
    from toolfold.storage import open_repository, set_value, value

    url = fresh_db(server, f"bench_notify_{followers}")
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, "--follower", url, "s", str(commits)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(followers)
    ]
    committed: dict[int, float] = {}
    try:
        for p in procs:
            wait_line(p, "LISTENING")
        async with open_repository(url) as repo:
            session = await repo.open_session("s", create=True)
            for i in range(commits):
                r = await session.commit([set_value(value("bench", "k"), i)])
                assert r.last_seq is not None
                committed[r.last_seq] = time.time()
                await asyncio.sleep(0.02)  # paced like checkpoints, not a flood
        lat = []
        for p in procs:
            out, _ = p.communicate(timeout=120)
            for line in out.splitlines():
                seq, at = line.split()
                if int(seq) in committed:
                    lat.append((float(at) - committed[int(seq)]) * 1000)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    lat.sort()
    return statistics.median(lat), lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def fresh_db(server: str, name: str) -> str:
    import psycopg

    from pg_fixture import with_dbname

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return with_dbname(server, name)


def wait_line(p: subprocess.Popen[str], prefix: str) -> None:
    assert p.stdout is not None
    for line in p.stdout:
        if line.startswith(prefix):
            return
    raise RuntimeError(f"host exited before {prefix!r}")


async def takeover(server: str, i: int) -> tuple[float, int]:
    """Seconds from SIGKILL of one of three hosts to its call's settlement; and the
    number of connections each host holds."""
    import psycopg

    from toolfold.storage import open_repository

    url = fresh_db(server, f"bench_hosts_{i}")
    hosts = [
        subprocess.Popen(
            [sys.executable, str(CHILD), url, "hosts", n, f"call-{n}", "1.0", "--janitor", "0.1"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in ("A", "B", "C")
    ]
    try:
        for h in hosts:
            wait_line(h, "READY")
        with psycopg.connect(url, autocommit=True) as conn:
            dbname = conn.info.dbname
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> "
                "pg_backend_pid()",
                (dbname,),
            ).fetchone()
            conns = int(row[0]) if row else 0
        async with open_repository(url) as repo:
            session = await repo.open_session("hosts")
            hosts[0].kill()
            killed = time.perf_counter()
            hosts[0].wait()
            for _ in range(20_000):
                if await session.entries_by_key("call-A"):
                    return time.perf_counter() - killed, conns // len(hosts)
                await asyncio.sleep(0.01)
        raise RuntimeError("the killed host's call was never settled")
    finally:
        for h in hosts:
            if h.poll() is None:
                h.kill()
            h.wait()


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--takeovers", type=int, default=3)
    args = ap.parse_args()
    cluster = None
    server = os.environ.get("TOOLFOLD_TEST_POSTGRES_DSN")
    if server is None:
        from pg_fixture import start_cluster

        cluster = start_cluster(fsync=True)
        server = cluster.dsn
    try:
        print("### Many hosts on one PostgreSQL\n")
        print(
            f"Command: `.venv/bin/python benchmarks/bench_pg_hosts.py --seconds {args.seconds} "
            f"--takeovers {args.takeovers}`\n"
        )
        print(
            "| writer processes | checkpoints/s unleased | checkpoints/s leased + fenced | ratio |"
        )
        print("| ---: | ---: | ---: | ---: |")
        for count in (1, 4, 16):
            url = fresh_db(server, f"bench_writers_{count}")
            plain = run_writers(url, count, args.seconds, leased=False)
            fenced = run_writers(url, count, args.seconds, leased=True)
            print(f"| {count} | {plain:,.0f} | {fenced:,.0f} | {fenced / plain:.2f} |")
        print()
        print("| follower processes (LISTEN) | NOTIFY latency p50 | p99 |")
        print("| ---: | ---: | ---: |")
        for followers in (1, 4):
            p50, p99 = await notify_latency(server, followers, 200)
            print(f"| {followers} | {p50:.2f} ms | {p99:.2f} ms |")
        times = []
        conns = 0
        for i in range(args.takeovers):
            t, conns = await takeover(server, i)
            times.append(t)
        print()
        print(
            f"Takeover after kill -9 of one of three hosts (lease 1.0 s, janitor every 0.1 s): "
            f"median {statistics.median(times):.2f} s, max {max(times):.2f} s over "
            f"{len(times)} kills (lease + {max(times) - 1.0:.2f} s at worst)."
        )
        print(f"Connections per host process (running one call, with a janitor): {conns}.")
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--follower":
        asyncio.run(follower(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--writer":
        n = asyncio.run(
            writer(sys.argv[2], sys.argv[3], float(sys.argv[4]), "--leased" in sys.argv)
        )
        print(n)
    else:
        asyncio.run(main())
