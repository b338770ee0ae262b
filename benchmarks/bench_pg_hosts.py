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
- Commit to SSE subscriber, through 1 and 4 ``toolfold serve`` replicas (real
  processes, one SSE subscriber process on each): a writer forces a durable checkpoint
  of a running call (one line ``mN``) every 20 ms; each subscriber folds its lane
  stream and notes when line N first shows. Side by side with the raw LISTEN
  followers above (what serve's follower cannot beat). Also the connections each
  replica holds while it follows one session for one subscriber.

Does NOT measure: a network between hosts and the server (everything is on loopback,
on 2 shared cores), a browser rendering the stream, many sessions or many
subscribers per replica, or PgBouncer. The SSE figures are those of serve's
follower at the time of the run (see docs/scaling.md).
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


async def notify_latency(
    server: str, followers: int, commits: int, *, from_start: bool = False
) -> tuple[float, float]:
    """p50 and p99 (ms) from a commit returning (``from_start``: being called) to each
    follower process waking up. A follower can wake before the writer's ``commit()``
    has returned, so only the start is a lower bound for every path."""
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
                started = time.time()
                r = await session.commit([set_value(value("bench", "k"), i)])
                assert r.last_seq is not None
                committed[r.last_seq] = started if from_start else time.time()
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


def sse_subscriber(base: str, token: str, count: int) -> None:
    """Follow lane ``s`` of a replica; print "N arrival-time" the first time line ``mN``
    shows in the lane's call, until ``count`` lines were seen."""
    import json
    import re

    import httpx

    from toolfold.chord import Decoder, apply

    seen: set[int] = set()
    value = None
    decoder = Decoder()
    headers = {"Authorization": f"Bearer {token}"}
    with (
        httpx.Client(base_url=base, headers=headers) as client,
        client.stream("GET", "/v1/lanes/s/state", timeout=120) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            value = apply(value, decoder.decode(json.loads(line[6:])))
            now = time.time()
            if not seen:
                print("SUBSCRIBED", flush=True)
            tools = (value or {}).get("tools") or {}
            call = next(iter(tools.values()), None)
            text = call["output"]["content"][0]["text"] if call and call["output"] else ""
            for n in map(int, re.findall(r"^m(\d+)$", text, re.M)):
                if n not in seen:
                    seen.add(n)
                    print(f"{n} {now}", flush=True)
            seen.add(-1)
            if len(seen) > count:
                return


def start_replica(url: str, token: str, name: str) -> tuple[subprocess.Popen[bytes], str]:
    """A ``toolfold serve`` on ``url`` (its connections tagged ``name``), once it answers."""
    import socket

    import httpx

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tagged = f"{url}{'&' if '?' in url else '?'}application_name={name}"
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLFOLD_STORE", "TOOLFOLD_TOKEN")}
    options = ["--port", str(port), "--token", token]
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolfold.cli", "serve", "--store", tagged, *options],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            r = httpx.get(f"{base}/v1/sessions", headers={"Authorization": f"Bearer {token}"})
            if r.status_code == 200:
                return proc, base
        except httpx.TransportError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"toolfold serve on port {port} did not answer")


async def sse_latency(server: str, replicas: int, lines: int) -> tuple[float, float, float]:
    """p50 and p99 (ms) from a checkpoint's commit starting to an SSE subscriber of each
    of ``replicas`` serve processes seeing it; and the connections per replica."""
    import secrets

    from pydantic import BaseModel

    from toolfold.durability import Durability
    from toolfold.harness import DurableHooks, Harness, ToolCall, ToolContext, tool
    from toolfold.output import OutputPolicy, ToolOutput
    from toolfold.storage import open_repository

    class NoParams(BaseModel):
        pass

    url = fresh_db(server, f"bench_sse_{replicas}")
    token = secrets.token_urlsafe(32)
    committed: dict[int, float] = {}
    conns: dict[str, int] = {}
    servers: list[subprocess.Popen[bytes]] = []
    subs: list[subprocess.Popen[str]] = []
    try:
        async with open_repository(url) as repo:
            session = await repo.open_session("s", create=True)
            bases = []
            for i in range(replicas):
                proc, base = start_replica(url, token, f"replica{i}")
                servers.append(proc)
                bases.append(base)
            hooks = DurableHooks(Durability(session, interval=0.0))

            @tool(params=NoParams, output=OutputPolicy(retain="tail", max_lines=lines + 10))
            async def writer(
                call_id: str,
                params: NoParams,
                cancel: asyncio.Event,
                out: ToolOutput,
                ctx: ToolContext,
            ) -> None:
                """Writes one line per durable checkpoint."""
                stream = next(iter(hooks._calls.values())).stream
                out.write("start\n")
                await stream.force()
                # The lane exists once the call does: subscribe now, start once all did.
                subs.extend(
                    subprocess.Popen(
                        [sys.executable, __file__, "--sse", base, token, str(lines)],
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    for base in bases
                )
                for p in subs:
                    await asyncio.to_thread(wait_line, p, "SUBSCRIBED")
                for i in range(lines):
                    out.write(f"m{i}\n")
                    committed[i] = time.time()
                    await stream.force()
                    await asyncio.sleep(0.02)  # paced like checkpoints, not a flood
                rows = await asyncio.to_thread(replica_connections, url)
                conns.update(rows)

            await Harness([writer], hooks=hooks).run([ToolCall("c", "writer")], run_id="r")
        lat = []
        for p in subs:
            out, _ = await asyncio.to_thread(p.communicate, timeout=120)
            for line in out.splitlines():
                n, at = line.split()
                lat.append((float(at) - committed[int(n)]) * 1000)
    finally:
        for p in [*subs, *servers]:
            if p.poll() is None:
                p.kill()
            p.wait()
    lat.sort()
    per_replica = statistics.mean(conns.get(f"replica{i}", 0) for i in range(replicas))
    return statistics.median(lat), lat[min(len(lat) - 1, int(len(lat) * 0.99))], per_replica


def replica_connections(url: str) -> dict[str, int]:
    """Backends per ``application_name`` on ``url``'s database (this one excluded)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name, count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "GROUP BY application_name"
        ).fetchall()
    return {str(name): int(n) for name, n in rows}


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


async def writers_and_listeners(server: str, seconds: float) -> None:
    print("| writer processes | checkpoints/s unleased | checkpoints/s leased + fenced | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    for count in (1, 4, 16):
        url = fresh_db(server, f"bench_writers_{count}")
        plain = run_writers(url, count, seconds, leased=False)
        fenced = run_writers(url, count, seconds, leased=True)
        print(f"| {count} | {plain:,.0f} | {fenced:,.0f} | {fenced / plain:.2f} |")
    print()
    print("| follower processes (LISTEN) | NOTIFY latency p50 | p99 |")
    print("| ---: | ---: | ---: |")
    for followers in (1, 4):
        p50, p99 = await notify_latency(server, followers, 200)
        print(f"| {followers} | {p50:.2f} ms | {p99:.2f} ms |")
    print()


async def replicas_table(server: str, lines: int) -> None:
    listen_p50, listen_p99 = await notify_latency(server, 1, lines, from_start=True)
    print(
        "| serve replicas | commit started → SSE subscriber saw it, p50 | p99 "
        "| p50 / raw LISTEN p50 | connections per replica |"
    )
    print("| ---: | ---: | ---: | ---: | ---: |")
    print(f"| (raw LISTEN, 1 follower) | {listen_p50:.2f} ms | {listen_p99:.2f} ms | 1 | |")
    for replicas in (1, 4):
        p50, p99, per = await sse_latency(server, replicas, lines)
        print(f"| {replicas} | {p50:.1f} ms | {p99:.1f} ms | {p50 / listen_p50:,.0f}x | {per:g} |")
    print()


async def takeovers(server: str, count: int) -> None:
    times = []
    conns = 0
    for i in range(count):
        t, conns = await takeover(server, i)
        times.append(t)
    print(
        f"Takeover after kill -9 of one of three hosts (lease 1.0 s, janitor every 0.1 s): "
        f"median {statistics.median(times):.2f} s, max {max(times):.2f} s over "
        f"{len(times)} kills (lease + {max(times) - 1.0:.2f} s at worst)."
    )
    print(f"Connections per host process (running one call, with a janitor): {conns}.")


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--takeovers", type=int, default=3)
    ap.add_argument("--lines", type=int, default=100, help="checkpoints per SSE run")
    ap.add_argument("--only-sse", action="store_true", help="only the SSE replicas table")
    args = ap.parse_args()
    cluster = None
    server = os.environ.get("TOOLFOLD_TEST_POSTGRES_DSN")
    if server is None:
        from pg_fixture import start_cluster

        cluster = start_cluster(fsync=True)
        server = cluster.dsn
    try:
        print("### Many hosts on one PostgreSQL\n")
        flags = f"--seconds {args.seconds} --takeovers {args.takeovers} --lines {args.lines}"
        if args.only_sse:
            flags = f"--only-sse --lines {args.lines}"
        print(f"Command: `.venv/bin/python benchmarks/bench_pg_hosts.py {flags}`\n")
        if not args.only_sse:
            await writers_and_listeners(server, args.seconds)
        await replicas_table(server, args.lines)
        if not args.only_sse:
            await takeovers(server, args.takeovers)
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--sse":
        sse_subscriber(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) > 1 and sys.argv[1] == "--follower":
        asyncio.run(follower(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    elif len(sys.argv) > 1 and sys.argv[1] == "--writer":
        n = asyncio.run(
            writer(sys.argv[2], sys.argv[3], float(sys.argv[4]), "--leased" in sys.argv)
        )
        print(n)
    else:
        asyncio.run(main())
