"""Durable tool output: bytes on disk, recovery cost, memo latency, checkpoint cadence.

Run: ``.venv/bin/python benchmarks/bench_durability.py [--quick]``. Prints markdown
tables (the "Durability" section of docs/BENCHMARKS.md). Sections:

1. bytes to the JSONL main log and side files for the worked bash example (256 KB
   build log through a 50 KB tail window, one checkpoint per 4 KB chunk) and for the
   storage workload (20 operations x 400 assistant frames + 2 tool calls x 60
   checkpoints of a 50 KB rolling window), before and after settle — the old design
   (whole value per checkpoint, main log) side by side;
2. recovery time vs batches since the last base, with and without periodic rebase;
3. memo commit latency (p50 / p99) per backend, fsync on (the default);
4. ordinary checkpoint cadence: writes/s, bytes/s and storage duty cycle for a shell
   producing 100 KB/s into a 50 KB window, per pacing interval (the default's basis).

PostgreSQL uses ``$TOOLFOLD_TEST_POSTGRES_DSN`` or a throwaway local cluster (skipped
with a note if neither is available).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import orjson  # noqa: E402

from toolfold.chord import track  # noqa: E402
from toolfold.durability import (  # noqa: E402
    DurableStream,
    TrackerSource,
    commit_memo,
    pending_assistant_output,
    pending_tool_output,
    recover,
)
from toolfold.output import OutputPolicy, ToolOutput  # noqa: E402
from toolfold.storage import (  # noqa: E402
    append_entry,
    ephemeral_scope,
    open_repository,
    retire_scope,
    set_value,
    value,
)

WINDOW = 50 * 1024


def log_lines(total: int, seed: int = 1) -> list[str]:
    """Varied build-log lines adding up to ``total`` bytes."""
    rng = random.Random(seed)
    words = ["compiling", "linking", "src/", "module", "warning:", "ok", "test", "build", "[", "]"]
    lines, size, n = [], 0, 0
    while size < total:
        n += 1
        line = f"{n:06d} " + " ".join(rng.choice(words) for _ in range(rng.randrange(3, 12))) + "\n"
        lines.append(line)
        size += len(line)
    return lines


def chunks(lines: list[str], size: int) -> list[str]:
    out, cur = [], ""
    for line in lines:
        cur += line
        if len(cur) >= size:
            out.append(cur)
            cur = ""
    if cur:
        out.append(cur)
    return out


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def tail_sink() -> ToolOutput:
    return ToolOutput(OutputPolicy(retain="tail", max_bytes=WINDOW, max_lines=100_000))


# -- 1. bytes -------------------------------------------------------------------------


async def bash_example(root: Path) -> dict[str, Any]:
    """256 KB log, 4 KB chunks, one checkpoint per chunk (64 checkpoints)."""
    pieces = chunks(log_lines(256 * 1024), 4096)
    # old design: the whole current value in the main log on every checkpoint
    old_dir = root / "old"
    old_dir.mkdir()
    repo = open_repository(f"jsonl:{old_dir}")
    s = await repo.open_session("bash", create=True)
    out = tail_sink()
    for piece in pieces:
        out.write(piece)
        await s.commit([set_value(value("pending.tool_output", "op:c"), dict(out.snapshot()))])
    old_before = dir_bytes(old_dir)
    await s.commit([append_entry({"role": "tool_result", "content": out.snapshot()["content"]})])
    await s.close()
    await repo.close()
    old_after = dir_bytes(old_dir)
    # this design: op batches appended to the operation's side file, retired on settle
    new_dir = root / "new"
    new_dir.mkdir()
    repo = open_repository(f"jsonl:{new_dir}")
    s = await repo.open_session("bash", create=True)
    out = tail_sink()
    ds = DurableStream(s, pending_tool_output("op", "c"), out.open_stream(), interval=0.0)
    for piece in pieces:
        out.write(piece)
        await ds.checkpoint()
    main = new_dir / "bash.jsonl"
    before_main, before_side = main.stat().st_size, dir_bytes(new_dir) - main.stat().st_size
    await ds.force()
    await s.commit(
        [
            append_entry({"role": "tool_result", "content": out.snapshot()["content"]}),
            retire_scope(ephemeral_scope("op")),
        ]
    )
    await s.close()
    await repo.close()
    after_main = main.stat().st_size
    after_side = dir_bytes(new_dir) - after_main
    return {
        "checkpoints": len(pieces),
        "old_before": old_before,
        "old_after": old_after,
        "main_before": before_main,
        "side_before": before_side,
        "main_after": after_main,
        "side_after": after_side,
    }


async def storage_workload(root: Path, ops: int) -> dict[str, Any]:
    """ops x (400 assistant frames + 2 tool calls x 60 checkpoints of a 50 KB window)."""
    rng = random.Random(3)
    d = root / "workload"
    d.mkdir()
    repo = open_repository(f"jsonl:{d}")
    s = await repo.open_session("w", create=True)
    main = d / "w.jsonl"
    side_peak = 0
    side_written = 0
    lines = log_lines(60 * 8 * 1024 + WINDOW, seed=5)
    for op_i in range(ops):
        op = f"op{op_i}"
        # assistant output: a tracked message (the same generic DurableStream)
        msg = track({"role": "assistant", "text": ""})
        a = DurableStream(s, pending_assistant_output(op, "e1"), TrackerSource(msg), interval=0.0)
        for _frame in range(400):
            msg.state["text"] += "".join(
                rng.choice("abcdefgh ") for _ in range(rng.randrange(4, 40))
            )
            await a.force()
        tools = []
        for c in range(2):
            out = tail_sink()
            ds = DurableStream(s, pending_tool_output(op, f"c{c}"), out.open_stream(), interval=0.0)
            pieces = chunks(lines, 8 * 1024)[:61]
            for piece in pieces:
                out.write(piece)
                await ds.checkpoint()
            tools.append(out)
        side = dir_bytes(d) - main.stat().st_size
        side_peak = max(side_peak, side)
        side_written += side
        await s.commit(
            [
                append_entry({"role": "assistant", "text": msg.target["text"]}),
                *[
                    append_entry({"role": "tool_result", "content": t.snapshot()["content"]})
                    for t in tools
                ],
                retire_scope(ephemeral_scope(op)),
            ]
        )
    await s.close()
    await repo.close()
    return {
        "ops": ops,
        "side_written": side_written,
        "side_peak": side_peak,
        "main_after": main.stat().st_size,
        "side_after": dir_bytes(d) - main.stat().st_size,
    }


# -- 2. recovery --------------------------------------------------------------------------


async def recovery_cost(root: Path, writes: int) -> list[tuple[str, int, int, float]]:
    """``writes`` durable writes into a 50 KB window; recovery with and without rebase."""
    rows = []
    lines = log_lines(writes * 800 + WINDOW, seed=9)
    pieces = chunks(lines, 600)[:writes]
    for backend in ("sqlite", "jsonl"):
        for rebase_every in (10**9, 50):
            d = root / f"rec-{backend}-{rebase_every}"
            d.mkdir()
            url = f"sqlite:{d / 's.db'}" if backend == "sqlite" else f"jsonl:{d}"
            repo = open_repository(url)
            s = await repo.open_session("r", create=True)
            out = tail_sink()
            ds = DurableStream(
                s,
                pending_tool_output("op", "c"),
                out.open_stream(),
                interval=0.0,
                rebase_every=rebase_every,
            )
            for piece in pieces:
                out.write(piece)
                await ds.checkpoint()
            await s.close()
            await repo.close()
            repo = open_repository(url)
            s = await repo.open_session("r")
            times = []
            for _ in range(5):
                t = time.perf_counter()
                got = await recover(s, pending_tool_output("op", "c"))
                times.append(time.perf_counter() - t)
            assert got is not None and got.value == out.snapshot()
            rows.append((backend, rebase_every, got.batches, statistics.median(times)))
            await s.close()
            await repo.close()
    return rows


async def recovery_vs_deltas(root: Path) -> list[tuple[int, float]]:
    """Recovery time on SQLite vs the number of deltas after the last base."""
    rows = []
    for n in (0, 10, 49, 100, 250, 499):
        d = root / f"vs-{n}"
        d.mkdir()
        repo = open_repository(f"sqlite:{d / 's.db'}")
        s = await repo.open_session("r", create=True)
        out = tail_sink()
        out.write("".join(log_lines(WINDOW, seed=n)))
        ds = DurableStream(
            s, pending_tool_output("op", "c"), out.open_stream(), interval=0.0, rebase_every=10**9
        )
        await ds.force()
        for piece in chunks(log_lines(n * 800 + 1, seed=n + 1), 600)[:n]:
            out.write(piece)
            await ds.force()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            got = await recover(s, pending_tool_output("op", "c"))
            times.append(time.perf_counter() - t)
        assert got is not None and got.batches == n + 1
        rows.append((n, statistics.median(times)))
        await s.close()
        await repo.close()
    return rows


# -- 3. memo latency ------------------------------------------------------------------------


async def memo_latency(url: str, n: int) -> tuple[float, float, int]:
    repo = open_repository(url)
    s = await repo.open_session("memo", create=True)
    out = tail_sink()
    out.write("".join(log_lines(WINDOW, seed=2)))  # a full 50 KB window
    ds = DurableStream(s, pending_tool_output("op", "c"), out.open_stream(), interval=0.0)
    await ds.force()
    times = []
    for i in range(n):
        out.write(f"step {i} done\n")
        t = time.perf_counter()
        await commit_memo(ds, "op", "c", f"step{i}", {"i": i})
        times.append(time.perf_counter() - t)
    await s.close()
    await repo.close()
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.99) - 1], len(times)


async def checkpoint_latency(url: str, n: int) -> float:
    """Median latency of one ordinary (delta) checkpoint of a busy 50 KB window."""
    repo = open_repository(url)
    s = await repo.open_session("cp", create=True)
    out = tail_sink()
    ds = DurableStream(s, pending_tool_output("op", "c"), out.open_stream(), interval=0.0)
    times = []
    for piece in chunks(log_lines(n * 2048 + 1, seed=4), 2048)[:n]:
        out.write(piece)
        t = time.perf_counter()
        await ds.checkpoint()
        times.append(time.perf_counter() - t)
    await s.close()
    await repo.close()
    return statistics.median(times[1:])


# -- 4. cadence -------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def cadence(interval: float, seconds: float = 60.0) -> tuple[int, int]:
    """A shell writing 100 KB/s (1 KB every 10 ms) for ``seconds``; the sink checkpoints
    on every change, paced at ``interval``. Returns (durable writes, bytes written)."""
    repo = open_repository("memory:")
    s = await repo.open_session("c", create=True)
    clock = Clock()
    out = tail_sink()
    ds = DurableStream(
        s, pending_tool_output("op", "c"), out.open_stream(), interval=interval, clock=clock
    )
    lines = log_lines(int(seconds * 100 * 1024) + 2048, seed=8)
    pieces = chunks(lines, 1024)
    steps = int(seconds / 0.01)
    for piece in pieces[:steps]:
        out.write(piece)
        clock.now += 0.01
        await ds.checkpoint()
    await ds.force()
    total = sum(len(orjson.dumps(e.value)) for e in await s.read_list(ds.address))
    await repo.close()
    return ds.stats.batches, total


def kb(n: float) -> str:
    return f"{n / 1024:,.1f} KB" if n < 1024 * 1024 else f"{n / 1024 / 1024:,.2f} MB"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    args = parser.parse_args()
    memo_n = 40 if args.quick else 200
    ops = 2 if args.quick else 20
    root = Path(tempfile.mkdtemp(prefix="bench-durability-"))
    try:
        print("## Durability\n")
        print(
            f"Command: `.venv/bin/python benchmarks/bench_durability.py{' --quick' if args.quick else ''}`\n"
        )

        b = await bash_example(root)
        print("### Bytes: the worked bash example (256 KB log, 50 KB tail window)\n")
        print(f"{b['checkpoints']} checkpoints (one per 4 KB chunk), JSONL backend.\n")
        print(
            "| design | main log before settle | side files before settle | main log after settle | side files after settle |"
        )
        print("| --- | ---: | ---: | ---: | ---: |")
        print(
            f"| whole value per checkpoint, main log (old) | {kb(b['old_before'])} | 0 | {kb(b['old_after'])} | 0 |"
        )
        print(
            f"| op batches in the operation scope (toolfold) | {kb(b['main_before'])} | {kb(b['side_before'])} | {kb(b['main_after'])} | {kb(b['side_after'])} |"
        )
        print(
            f"\nmain log after settle: {b['old_after'] / b['main_after']:.0f}x smaller than the old design\n"
        )

        w = await storage_workload(root, ops)
        print(
            f"### Bytes: the storage workload ({ops} operations x (400 assistant frames + 2 tool calls x 60 checkpoints), 50 KB window)\n"
        )
        print(
            "| side-file bytes written (all operations) | largest live side files | main log after settle | side files after settle |"
        )
        print("| ---: | ---: | ---: | ---: |")
        print(
            f"| {kb(w['side_written'])} | {kb(w['side_peak'])} | {kb(w['main_after'])} | {kb(w['side_after'])} |"
        )
        print(
            "\nUpstream: 93.89 MB (whole values, one file) → 5.32 MB (encoded) → 0.06 MB (encoded + scopes, main log after settle).\n"
        )

        rows = await recovery_cost(root, 100 if args.quick else 500)
        print(f"### Recovery: {100 if args.quick else 500} durable writes into a 50 KB window\n")
        print("| backend | periodic rebase | batches replayed | recovery time |")
        print("| --- | --- | ---: | ---: |")
        for backend, every, batches, t in rows:
            label = "every 50 batches" if every == 50 else "none"
            print(f"| {backend} | {label} | {batches} | {t * 1000:.2f} ms |")
        print()
        vs = await recovery_vs_deltas(root)
        print(
            "### Recovery time vs deltas since the last base (SQLite, 600 B deltas on a 50 KB window)\n"
        )
        print("| deltas after the base | recovery time | vs base only |")
        print("| ---: | ---: | ---: |")
        for n, t in vs:
            print(f"| {n} | {t * 1000:.2f} ms | {t / vs[0][1]:.1f}x |")
        print()

        print(
            f"### Memo commit latency (memo + 50 KB base checkpoint + seed, one transaction, fsync on; {memo_n} commits)\n"
        )
        print("| backend | p50 | p99 | ordinary delta checkpoint (p50) |")
        print("| --- | ---: | ---: | ---: |")
        urls = [("memory", "memory:")]
        for name in ("jsonl", "sqlite"):
            d = root / f"memo-{name}"
            d.mkdir()
            urls.append((name, f"jsonl:{d}" if name == "jsonl" else f"sqlite:{d / 'm.db'}"))
        cluster = None
        pg = os.environ.get("TOOLFOLD_TEST_POSTGRES_DSN")
        if pg is None:
            try:
                from pg_fixture import start_cluster

                cluster = start_cluster(fsync=True)
                pg = cluster.dsn
            except Exception as exc:  # no PostgreSQL here: say so, measure the rest
                print(f"(PostgreSQL not measured: {exc})\n")
        if pg is not None:
            urls.append(("postgres", pg))
        latencies: dict[str, float] = {}
        try:
            for name, url in urls:
                p50, p99, _ = await memo_latency(url, memo_n)
                if name != "memory":
                    # fresh store for the checkpoint measurement
                    if name == "jsonl":
                        d = root / "cp-jsonl"
                        d.mkdir()
                        url = f"jsonl:{d}"
                    elif name == "sqlite":
                        url = f"sqlite:{root / 'cp.db'}"
                cp = await checkpoint_latency(url, memo_n)
                latencies[name] = cp
                print(
                    f"| {name} | {p50 * 1000:.2f} ms | {p99 * 1000:.2f} ms | {cp * 1000:.2f} ms |"
                )
        finally:
            if cluster is not None:
                cluster.stop()
        print()

        print("### Checkpoint cadence (shell writing 100 KB/s into a 50 KB window for 60 s)\n")
        print(
            "| interval | durable writes / s | bytes / s to the side file | SQLite duty cycle | JSONL duty cycle | output at risk on a crash |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for interval in (0.0, 0.1, 0.25, 0.5, 1.0, 2.0):
            writes, total = await cadence(interval)
            per_s = writes / 60
            duty_sq = per_s * latencies.get("sqlite", 0.0) * 100
            duty_js = per_s * latencies.get("jsonl", 0.0) * 100
            # What a crash between two checkpoints can lose from the retained window (the
            # spill file keeps everything; the window never holds more than 50 KB).
            at_risk = min(max(interval, 0.01) * 100 * 1024, WINDOW)
            risk = f"≤ {max(interval, 0.01):g} s of output ({kb(at_risk)})"
            print(
                f"| {interval:g} s | {per_s:.1f} | {kb(total / 60)} | {duty_sq:.1f} % | {duty_js:.1f} % | {risk} |"
            )
        print()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
