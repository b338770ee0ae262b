"""The cost of a small durable call through ``Harness``, per backend, side by side.

    .venv/bin/python benchmarks/bench_small_call.py [--calls 200] [--before SRC]
        [--backends none,memory,jsonl,sqlite,postgres]

One trivial tool (it writes ``ok``) called ``--calls`` times, one call per
``Harness.run``, awaited in turn, on a store opened with the default ``FsyncPolicy``
(every commit durable against power loss): what one short agent call costs. Each
configuration runs in a fresh process; the rows are interleaved (every backend of every
tree, then again), ``--rounds`` times, and each figure is the median over the rounds of
the per-round median. Reported per row:

- the median and p90 wall time of one call, and its ratio to the same call through a
  ``Harness`` without a store (``none``: nothing durable, the alternative a user would
  pick when durability is not needed);
- commits per call (storage transactions, counted at the backend);
- fsyncs per call: ``fsync``/``fdatasync`` system calls of the process, counted with
  ``strace -f -c`` over a run of ``--calls`` calls minus a run of none (JSONL, SQLite);
  on PostgreSQL the server's WAL syncs (``pg_stat_wal.wal_sync``) over the calls.

A backend may carry options after ``+``: ``leased`` (the harness takes a lease per call
with the host's record, as ``toolfold mcp``, ``run`` and ``serve`` do), ``side``
(``FsyncPolicy(side="none")``), ``nosync`` (``FsyncPolicy("none", "none")``), e.g.
``--backends none,sqlite,sqlite+leased,sqlite+nosync``.

``--before SRC`` adds the same rows for another source tree (``git archive <commit> src
| tar -x -C /tmp/before``, then ``--before /tmp/before/src``).

PostgreSQL is a throwaway local cluster (``tests/pg_fixture.py``, fsync on, Unix
socket), on the same 2 cores as the client. Not measured: concurrent calls (each call
here waits for the previous one), other disks, a remote database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


async def child(backend: str, url: str, calls: int) -> dict[str, Any]:
    """One configuration, in this process: ``calls`` trivial durable calls."""
    from pydantic import BaseModel

    from toolfold.durability import Durability
    from toolfold.harness import DurableHooks, Harness, ToolCall, tool
    from toolfold.storage import FsyncPolicy, open_repository

    backend, *options = backend.split("+")
    fsync = FsyncPolicy()
    if "side" in options:
        fsync = FsyncPolicy(side="none")
    if "nosync" in options:
        fsync = FsyncPolicy("none", "none")

    class NoParams(BaseModel):
        pass

    @tool(params=NoParams, name="ok")
    async def ok(tool_call_id: str, params: NoParams, cancel: Any, out: Any, ctx: Any) -> None:
        """Say ok."""
        out.write("ok\n")

    repo = None
    commits = 0
    if backend == "none":
        harness = Harness([ok])
    else:
        repo = open_repository(url, fsync=fsync)
        session = await repo.open_session(f"s-{uuid.uuid4().hex[:8]}", create=True)
        inner = session._commit_writes

        async def counting(*args: Any) -> Any:
            nonlocal commits
            commits += 1
            return await inner(*args)

        session._commit_writes = counting  # type: ignore[method-assign]
        if "leased" in options:
            # What a leased host (`toolfold mcp`, `run`, `serve`) does per call.
            hooks = DurableHooks(Durability(session, host=f"bench:{os.getpid()}"))
            harness = Harness([ok], hooks=hooks)
        else:
            harness = Harness([ok], session=session)
    for i in range(min(calls, 5)):  # warm-up: first-use costs are not a call's
        await harness.run([ToolCall(f"w{i}", "ok", {})])
    commits = 0
    wal_before = await wal_syncs(url) if backend == "postgres" else 0
    times = []
    for i in range(calls):
        t0 = time.perf_counter()
        [result] = await harness.run([ToolCall(f"c{i}", "ok", {})])
        times.append(time.perf_counter() - t0)
        assert not result.is_error, result
    if repo is not None:
        await repo.close()
    wal = 0
    if backend == "postgres":
        await asyncio.sleep(1.2)  # a backend reports its WAL counters at most every second
        wal = await wal_syncs(url) - wal_before
    return {
        "median": statistics.median(times) * 1000 if times else 0.0,
        "p90": sorted(times)[int(0.9 * (len(times) - 1))] * 1000 if times else 0.0,
        "commits": commits / calls if calls else 0.0,
        "wal_syncs": wal / calls if calls else 0.0,
    }


async def wal_syncs(url: str) -> int:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute("SELECT wal_sync FROM pg_stat_wal")
        row = await cur.fetchone()
        return int(row[0]) if row else 0


def run_child(
    src: Path, backend: str, url: str, calls: int, strace: bool = False
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", backend, url, str(calls)]
    out_file = None
    if strace:
        out_file = Path(tempfile.mktemp(prefix="bench-strace-"))
        cmd = ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(out_file), *cmd]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if out_file is not None:
        text = out_file.read_text()
        out_file.unlink()
        # Rows of `strace -c`: % time, seconds, usecs/call, calls, [errors,] syscall.
        result["fsyncs"] = sum(
            int(parts[3])
            for parts in (line.split() for line in text.splitlines())
            if parts and parts[-1] in ("fsync", "fdatasync")
        )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backends", default="none,memory,jsonl,sqlite,postgres")
    parser.add_argument("--before", help="another source tree's src/ for 'before' rows")
    parser.add_argument("--child", nargs=3, metavar=("BACKEND", "URL", "CALLS"))
    args = parser.parse_args()
    if args.child:
        backend, url, calls = args.child
        print(json.dumps(asyncio.run(child(backend, url, int(calls)))))
        return
    trees = [("after", ROOT / "src")]
    if args.before:
        trees.append(("before", Path(args.before).resolve()))
    backends = args.backends.split(",")
    cluster = None
    pg = os.environ.get("TOOLFOLD_TEST_POSTGRES_DSN")
    if any(b.split("+")[0] == "postgres" for b in backends) and pg is None:
        from pg_fixture import start_cluster

        cluster = start_cluster(fsync=True)
        pg = cluster.dsn
    tmp = Path(tempfile.mkdtemp(prefix="bench-small-call-"))
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:

        def url_for(spec: str, tree: str, r: int) -> str:
            backend = spec.split("+")[0]
            tag = spec.replace("+", "-")
            if backend == "jsonl":
                return f"jsonl:{tmp / f'{tree}-{r}-{tag}'}"
            if backend == "sqlite":
                return f"sqlite:{tmp / f'{tree}-{r}-{tag}.db'}"
            if backend == "postgres":
                assert pg is not None
                return pg
            return "memory:"

        for r in range(args.rounds):
            for backend in backends:
                for tree, src in trees:
                    got = run_child(src, backend, url_for(backend, tree, r), args.calls)
                    if r == 0 and backend.split("+")[0] in ("jsonl", "sqlite"):
                        many = run_child(
                            src, backend, url_for(backend, tree, 100 + r), args.calls, True
                        )
                        none = run_child(src, backend, url_for(backend, tree, 200 + r), 0, True)
                        got["fsyncs"] = (many["fsyncs"] - none["fsyncs"]) / args.calls
                    rows.setdefault((tree, backend), []).append(got)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if cluster is not None:
            cluster.stop()
    base = {
        tree: statistics.median(g["median"] for g in rows[(tree, "none")])
        for tree, _ in trees
        if (tree, "none") in rows
    }
    print(f"{args.calls} calls per run, {args.rounds} rounds, medians of the per-run figures\n")
    print(
        "| backend | tree | per call (median) | p90 | vs no store | commits / call | fsyncs / call |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for backend in backends:
        for tree, _ in trees:
            runs = rows[(tree, backend)]
            med = statistics.median(g["median"] for g in runs)
            p90 = statistics.median(g["p90"] for g in runs)
            ratio = f"{med / base[tree]:.1f}x" if tree in base else "—"
            kind = backend.split("+")[0]
            if kind == "postgres":
                syncs = f"{statistics.median(g['wal_syncs'] for g in runs):.1f} (server WAL)"
            elif kind in ("jsonl", "sqlite"):
                syncs = f"{runs[0]['fsyncs']:.1f}"
            else:
                syncs = "0"
            commits = statistics.median(g["commits"] for g in runs)
            print(
                f"| {backend} | {tree} | {med:.2f} ms | {p90:.2f} ms | {ratio} "
                f"| {commits:.1f} | {syncs} |"
            )


if __name__ == "__main__":
    main()
