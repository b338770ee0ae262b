"""The upstream storage workload: how many main-log bytes a session leaves behind.

20 operations; each streams an assistant message over 400 frames and runs 2 tool calls
with 60 durable checkpoints each of a 50 KB rolling window, then settles (result
entries). Three designs, side by side, same content:

1. whole values — every frame / checkpoint written as the full current value into the
   main log (the old design), in (a) a verbose one-object-per-write JSONL format like the
   original store's and (b) toolfold's compact records;
2. encoded — one Chord wire batch (``Encoder``) appended per frame / checkpoint, still
   in the main log (session scope), deleted at settle;
3. encoded + scopes — the same batches in the operation's ephemeral scope (a side
   file), retired at settle: the main log keeps only settled history.

Upstream figures: 93.89 MB -> 5.32 MB -> 0.06 MB.

Run: ``.venv/bin/python benchmarks/bench_storage_workload.py [--ops N]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from toolfold.chord import Encoder, is_base
from toolfold.storage import (
    SESSION,
    FsyncPolicy,
    Scope,
    Session,
    Write,
    append_entry,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._jsonl import JsonlRepository

FRAMES = 400  # assistant frames per operation
TOOLS = 2  # tool calls per operation
CHECKPOINTS = 60  # durable checkpoints per tool call
WINDOW = 50_000  # rolling window of tool output, in characters (ASCII: bytes)
TOOL_CHUNK = 2_000  # new tool output per checkpoint (the window is full after 25)

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "are",
    "with",
    "as",
    "his",
    "they",
    "be",
    "at",
    "one",
    "have",
    "this",
    "from",
    "or",
    "had",
    "by",
    "hot",
    "word",
    "but",
    "what",
    "some",
    "we",
    "can",
    "out",
    "other",
    "were",
    "all",
    "there",
    "when",
    "up",
    "use",
    "your",
    "how",
    "said",
    "an",
    "each",
    "she",
    "which",
    "do",
    "their",
    "time",
    "if",
    "will",
    "way",
    "about",
    "many",
    "then",
    "them",
    "write",
    "would",
    "like",
    "so",
    "these",
    "her",
    "long",
    "make",
    "thing",
    "see",
    "him",
    "two",
    "has",
    "look",
    "more",
    "day",
    "could",
    "go",
    "come",
    "did",
    "number",
    "sound",
    "no",
    "most",
    "people",
    "my",
    "over",
    "know",
    "water",
    "than",
    "call",
    "first",
    "who",
    "may",
    "down",
    "side",
]


def text(rng: random.Random, n: int) -> str:
    """Varied prose-like text of exactly ``n`` characters (repeated fixtures would
    flatter any compression and hide the real costs)."""
    parts: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(WORDS)
        parts.append(w)
        size += len(w) + 1
    return " ".join(parts)[:n]


# -- the workload as a stream of events ----------------------------------------------------

Event = tuple[str, Any]


def workload(ops: int, seed: int = 7) -> Iterator[tuple[int, Event]]:
    """Yield ``(operation, event)``: ("frame", (text so far, chunk)), ("checkpoint",
    (tool, window, dropped, chunk)), ("settle", (message, results))."""
    rng = random.Random(seed)
    for op in range(ops):
        message = ""
        for _ in range(FRAMES):
            chunk = text(rng, rng.randint(6, 10))
            message += chunk
            yield op, ("frame", (message, chunk))
        results = []
        for tool in range(TOOLS):
            window = ""
            total = 0
            for _ in range(CHECKPOINTS):
                chunk = text(rng, TOOL_CHUNK) + "\n"
                total += len(chunk)
                grown = window + chunk
                dropped = max(0, len(grown) - WINDOW)
                window = grown[dropped:]
                yield op, ("checkpoint", (tool, window, dropped, chunk))
            # the settled result is bounded: a short tail + where the full output is
            results.append(
                {
                    "role": "toolResult",
                    "toolCallId": f"call_{op}_{tool}",
                    "content": [{"type": "text", "text": window[-160:]}],
                    "details": {"totalChars": total, "spill": f"spill/{op}-{tool}.log"},
                }
            )
        yield op, ("settle", (message, results))


def message_value(text_so_far: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text_so_far}]}


# -- the three designs, as transactions -------------------------------------------------------


class Design:
    """Turns workload events into storage transactions."""

    name = "?"

    def __init__(self) -> None:
        self.encoders: dict[tuple[int, str], Encoder] = {}

    def scope(self, op: int) -> Scope:
        return SESSION

    def transactions(self, op: int, event: Event) -> list[list[Write]]:
        raise NotImplementedError


class WholeValues(Design):
    name = "whole values"

    def transactions(self, op: int, event: Event) -> list[list[Write]]:
        kind, payload = event
        frames = list_address("pending.assistant_frames", f"op{op}:msg", self.scope(op))
        if kind == "frame":
            return [[append_list(frames, message_value(payload[0]))]]
        if kind == "checkpoint":
            tool, window, _, _ = payload
            out = value("pending.tool_output", f"op{op}:call{tool}", self.scope(op))
            return [[set_value(out, {"content": [{"type": "text", "text": window}]})]]
        message, results = payload
        cleanup: list[Write] = [delete_list(frames)]
        cleanup += [
            delete_value(value("pending.tool_output", f"op{op}:call{t}", self.scope(op)))
            for t in range(TOOLS)
        ]
        return [cleanup, [append_entry(message_value(message)), *map(append_entry, results)]]


class Encoded(Design):
    name = "encoded op batches"

    def transactions(self, op: int, event: Event) -> list[list[Write]]:
        kind, payload = event
        scope = self.scope(op)
        msg = list_address("pending.assistant_output", f"op{op}:msg", scope)
        if kind == "frame":
            text_so_far, chunk = payload
            ops: list[Any]
            if len(text_so_far) == len(chunk):  # first frame: a base batch
                ops = [["r", message_value(text_so_far)]]
            else:
                ops = [["a", ["content", 0, "text"], chunk]]
            return [[self._append(msg, op, "msg", ops)]]
        if kind == "checkpoint":
            tool, window, dropped, chunk = payload
            out = list_address("pending.tool_output", f"op{op}:call{tool}", scope)
            if len(window) == len(chunk) and not dropped:
                ops = [["r", {"content": [{"type": "text", "text": window}]}]]
            else:
                path = ["content", 0, "text"]
                ops = ([["t", path, dropped]] if dropped else []) + [["a", path, chunk]]
            return [[self._append(out, op, f"call{tool}", ops)]]
        message, results = payload
        return self.settle(op, message, results)

    def _append(self, address: Any, op: int, stream: str, ops: list[Any]) -> Write:
        enc = self.encoders.setdefault((op, stream), Encoder())
        wire = enc.encode(ops)
        return append_list(address, wire, tag="base" if is_base(ops) else None)

    def settle(self, op: int, message: str, results: list[Any]) -> list[list[Write]]:
        scope = self.scope(op)
        cleanup: list[Write] = [
            delete_list(list_address("pending.assistant_output", f"op{op}:msg", scope))
        ]
        cleanup += [
            delete_list(list_address("pending.tool_output", f"op{op}:call{t}", scope))
            for t in range(TOOLS)
        ]
        return [cleanup, [append_entry(message_value(message)), *map(append_entry, results)]]


class EncodedScoped(Encoded):
    name = "encoded + scopes"

    def scope(self, op: int) -> Scope:
        return ephemeral_scope(f"op{op}")

    def settle(self, op: int, message: str, results: list[Any]) -> list[list[Write]]:
        retire: Write = retire_scope(ephemeral_scope(f"op{op}"))
        return [[append_entry(message_value(message)), *map(append_entry, results), retire]]


# -- running ----------------------------------------------------------------------------------


def verbose_line(seq: int, w: Write) -> bytes:
    """The old one-object-per-write JSONL record (field names spelled out every time)."""
    kind = type(w).__name__
    rec: dict[str, Any] = {"seq": seq, "type": kind[0].lower() + kind[1:]}
    address = getattr(w, "address", None)
    if address is not None:
        rec["namespace"] = address.namespace
        rec["key"] = address.key
    for field in ("value", "element", "entry"):
        if hasattr(w, field):
            rec["value"] = getattr(w, field)
    return orjson.dumps(rec) + b"\n"


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


async def run_design(design: Design, ops: int, root: Path) -> dict[str, Any]:
    repo = JsonlRepository(root, fsync=FsyncPolicy(main="none", side="none"))
    session: Session = await repo.create_session("w")
    main = root / "w.jsonl"
    side_peak = 0
    written = 0
    commits = 0
    started = time.perf_counter()
    for op, event in workload(ops):
        for txn in design.transactions(op, event):
            size = main.stat().st_size
            await session.commit(txn)
            commits += 1
            written += main.stat().st_size - size
        if event[0] == "checkpoint" and event[1][0] == TOOLS - 1:
            side_peak = max(side_peak, dir_bytes(root / "w.jsonl.scopes"))
    elapsed = time.perf_counter() - started
    live = await session.live_scopes()
    await repo.close()
    started = time.perf_counter()
    repo = JsonlRepository(root)
    session = await repo.open_session("w")
    reopen = time.perf_counter() - started
    entries = len(await session.read_entries())
    await repo.close()
    return {
        "main": main.stat().st_size,
        "side_peak": side_peak,
        "left": dir_bytes(root) - main.stat().st_size,
        "commits": commits,
        "seconds": elapsed,
        "reopen": reopen,
        "entries": entries,
        "live": len(live),
    }


def run_verbose(ops: int, root: Path) -> dict[str, Any]:
    design = WholeValues()
    path = root / "verbose.jsonl"
    seq = 0
    started = time.perf_counter()
    with open(path, "wb") as f:
        for op, event in workload(ops):
            for txn in design.transactions(op, event):
                for w in txn:
                    seq += 1
                    f.write(verbose_line(seq, w))
    return {"main": path.stat().st_size, "seconds": time.perf_counter() - started}


def mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=20, help="operations (default 20)")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results["verbose"] = run_verbose(args.ops, root)
        designs: list[tuple[str, Callable[[], Design]]] = [
            ("whole", WholeValues),
            ("encoded", Encoded),
            ("scoped", EncodedScoped),
        ]
        for key, make in designs:
            d = root / key
            d.mkdir()
            results[key] = asyncio.run(run_design(make(), args.ops, d))
    history = results["scoped"]["main"]
    print(
        f"workload: {args.ops} operations x ({FRAMES} assistant frames + {TOOLS} tool calls x "
        f"{CHECKPOINTS} checkpoints of a {WINDOW // 1000} KB window, +{TOOL_CHUNK} B each)"
    )
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, fsync off (bytes, not speed)")
    print()
    print("| design | main-log bytes | vs whole values | upstream | commits | time | reopen |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    base = results["verbose"]["main"]
    print(
        f"| 1a. whole values, verbose records (old format) | {mb(base)} | 1.00x | 93.89 MB "
        f"| - | {results['verbose']['seconds']:.2f} s | - |"
    )
    rows = [
        ("1b. whole values, compact records", "whole", "-"),
        ("2. encoded op batches (main log)", "encoded", "5.32 MB"),
        ("3. encoded + scopes (main log only)", "scoped", "0.06 MB"),
    ]
    for label, key, upstream in rows:
        r = results[key]
        print(
            f"| {label} | {mb(r['main'])} | {r['main'] / base:.4f}x | {upstream} | "
            f"{r['commits']} | {r['seconds']:.2f} s | {r['reopen'] * 1000:.1f} ms |"
        )
    scoped = results["scoped"]
    print()
    print(
        f"encoded + scopes: peak side-file bytes {mb(scoped['side_peak'])} (one live "
        f"operation), left on disk besides the main log {scoped['left']} B, live scopes "
        f"after settle {scoped['live']}; settled entries {scoped['entries']}; "
        f"main log = settled history ({history} B)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
