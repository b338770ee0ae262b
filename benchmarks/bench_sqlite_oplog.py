"""SQLite write amplification of durable tool output, against the design it replaces.

    .venv/bin/python benchmarks/bench_sqlite_oplog.py [--mb 10] [--cadences 4,16,64,128,512]

A command writes ``--mb`` MB of varied build-log lines through a 50 KB tail window, with
one durable checkpoint per ``cadence`` KB of output, then settles (result entry +
retirement of the operation scope in one transaction) and the store is closed. Both
designs run side by side on their own SQLite file with the same settings
(``journal_mode=WAL``, ``synchronous=FULL``: the default fsync policy):

- **toolfold**: ``DurableStream`` appending encoded Chord batches to the operation's
  list in ``toolfold.storage``'s SQLite backend (a base batch every ``rebase_every``);
- **one-row rewrite** (implemented here): one table ``pending(id PRIMARY KEY, value)``
  whose single row is replaced by the whole window's JSON at every checkpoint, and at
  settle the result inserted into ``entries`` and the row deleted, in one transaction.

"bytes written" is the growth of ``wchar`` in ``/proc/self/io`` over the run: every
byte this process handed to ``write()``/``pwrite()`` (WAL frames, checkpoints into the
database file, the -shm index). "file after settle" is the database plus its -wal
file once the store is closed. Not measured: what the kernel and the disk do with
those bytes (journaling, write-back merging), read traffic, other backends.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from toolfold.durability import DurableStream, pending_tool_output
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import append_entry, ephemeral_scope, open_repository, retire_scope

WINDOW = 50 * 1024


def wchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    raise RuntimeError("no wchar in /proc/self/io")


def pieces(total: int, size: int, seed: int = 1) -> list[str]:
    """Varied build-log text, ``total`` bytes cut into ``size``-byte chunks of lines."""
    rng = random.Random(seed)
    words = ["compiling", "linking", "src/", "module", "warning:", "ok", "test", "build"]
    out, cur, done, n = [], [], 0, 0
    cur_size = 0
    while done < total:
        n += 1
        line = f"{n:07d} " + " ".join(rng.choice(words) for _ in range(rng.randrange(3, 12)))
        line += "\n"
        cur.append(line)
        cur_size += len(line)
        done += len(line)
        if cur_size >= size:
            out.append("".join(cur))
            cur, cur_size = [], 0
    if cur:
        out.append("".join(cur))
    return out


def sink() -> ToolOutput:
    return ToolOutput(OutputPolicy(retain="tail", max_bytes=WINDOW, max_lines=1_000_000))


def file_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


class CountingStream(DurableStream):
    """Counts the encoded bytes of every batch it plans (the payload the store gets)."""

    payload = 0

    def plan(self, *, base: bool = False) -> list[Any]:
        writes = super().plan(base=base)
        self.payload += sum(len(orjson.dumps(w.element)) for w in writes if hasattr(w, "element"))
        return writes


PAYLOAD = [0]


async def toolfold_run(db: Path, chunks: list[str]) -> tuple[int, int, int]:
    start = wchar()
    repo = open_repository(f"sqlite:{db}")
    s = await repo.open_session("bench", create=True)
    out = sink()
    ds = CountingStream(s, pending_tool_output("op", "c"), out.open_stream(), interval=0.0)
    for piece in chunks:
        out.write(piece)
        await ds.checkpoint()
    await ds.force()
    PAYLOAD[0] = ds.payload
    peak = file_bytes(db)
    result = {"role": "tool_result", "content": out.snapshot()["content"]}
    await s.commit([append_entry(result), retire_scope(ephemeral_scope("op"))])
    await s.close()
    await repo.close()
    return wchar() - start, peak, file_bytes(db)


def one_row_run(db: Path, chunks: list[str]) -> tuple[int, int, int]:
    start = wchar()
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE pending (id TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute("CREATE TABLE entries (seq INTEGER PRIMARY KEY, value TEXT NOT NULL)")
    out = sink()
    for piece in chunks:
        out.write(piece)
        data = orjson.dumps(out.snapshot()).decode()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT OR REPLACE INTO pending (id, value) VALUES ('op:c', ?)", (data,))
        conn.execute("COMMIT")
    peak = file_bytes(db)
    result = orjson.dumps({"role": "tool_result", "content": out.snapshot()["content"]})
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("INSERT INTO entries (value) VALUES (?)", (result.decode(),))
    conn.execute("DELETE FROM pending WHERE id = 'op:c'")
    conn.execute("COMMIT")
    conn.close()
    return wchar() - start, peak, file_bytes(db)


def mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--cadences", default="4,16,64,128,512")
    args = parser.parse_args()
    total = int(args.mb * 1e6)
    print(
        "| KB per checkpoint | checkpoints | toolfold written | one-row written | ratio "
        "| toolfold file after settle | one-row file | ratio | toolfold peak file "
        "| batch payload per checkpoint | toolfold written per checkpoint |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kb in (int(c) for c in args.cadences.split(",")):
        chunks = pieces(total, kb * 1024)
        with tempfile.TemporaryDirectory(prefix="bench-oplog-") as tmp:
            t0 = time.perf_counter()
            tf_w, tf_peak, tf_file = asyncio.run(toolfold_run(Path(tmp) / "toolfold.db", chunks))
            t1 = time.perf_counter()
            row_w, _, row_file = one_row_run(Path(tmp) / "onerow.db", chunks)
            t2 = time.perf_counter()
        print(
            f"| {kb} | {len(chunks)} | {mb(tf_w)} | {mb(row_w)} | {tf_w / row_w:.2f}x "
            f"| {mb(tf_file)} | {mb(row_file)} | {tf_file / row_file:.2f}x | {mb(tf_peak)} "
            f"| {PAYLOAD[0] / len(chunks) / 1024:.1f} KB | {tf_w / len(chunks) / 1024:.1f} KB |",
            flush=True,
        )
        print(f"  ({kb} KB: toolfold {t1 - t0:.1f} s, one-row {t2 - t1:.1f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
