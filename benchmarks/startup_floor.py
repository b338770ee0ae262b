"""The floor of a durable ``run``: the least a process must import and do to run a
command with what ``toolfold run`` guarantees, written without toolfold.

    python benchmarks/startup_floor.py [--sync] [--classes N] -- COMMAND...

What it does, as ``toolfold run`` does: a SQLite store in WAL mode with every commit
flushed (``synchronous=FULL``, the default store's policy); the call's start committed
before the command runs; the command in its own process with its output read from a
pipe, all of it written to a private (0600) spill file and only a bounded tail window
kept; the settlement (exit status, totals, window) committed; the window printed and the
command's exit status passed through.

What it leaves out, so that it stays a floor: the session, the lease and its heartbeat,
the paced checkpoints of a long command, the structural ops, the live view, the checks
of the spill directory, signals, every option. ``bench_startup.py`` runs it beside
``toolfold run -- true``: the gap between the two is what toolfold adds.

The default is on asyncio, the runtime toolfold's exec env and harness are built on.
``--sync`` does the same with ``subprocess`` alone, to show what asyncio's import
costs on its own. Both end as ``toolfold run`` does: output flushed, then
``os._exit`` rather than the interpreter's teardown.

``--classes N`` first defines (and instantiates once) N frozen, slotted dataclasses of
four fields, as many as the classes ``toolfold run -- true`` instantiates (39; most of
toolfold's are frozen, slotted, four or five fields): the least of toolfold's own code
a run on its present classes pays at import, whatever else is cut (the ``@dataclass``
decorator compiles each class's ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` at import).
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys

WINDOW = 50 * 1024
"""The tail window kept in memory and stored, as ``toolfold run``'s default."""


def open_store(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE IF NOT EXISTS calls (id TEXT PRIMARY KEY, record TEXT NOT NULL)")
    return db


def commit(db: sqlite3.Connection, call_id: str, record: dict[str, object]) -> None:
    db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?)", (call_id, json.dumps(record)))


def spill_file(call_id: str) -> int:
    os.makedirs("floor-spill", mode=0o700, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(os.path.join("floor-spill", f"{call_id}.log"), flags, 0o600)


def settle(
    db: sqlite3.Connection, call_id: str, command: str, code: int, total: int, tail: bytes
) -> int:
    text = tail.decode("utf-8", errors="replace")
    commit(db, call_id, {"command": command, "exit_code": code, "bytes": total, "window": text})
    db.close()
    sys.stdout.write(text)
    return code & 0xFF if code >= 0 else 128 - code


def record_class(i: int, decorator: object = None, **options: bool) -> type:
    """A dataclass ``Record{i}`` of four fields, two with defaults, made with
    ``options`` (what most of toolfold's records look like) by ``decorator``
    (``dataclasses.dataclass`` unless given)."""
    if decorator is None:
        from dataclasses import dataclass as decorator

    namespace = {
        "__annotations__": {"a": "int", "b": "str", "c": "tuple[str, ...]", "d": "int | None"},
        "c": (),
        "d": None,
        "__doc__": "A record.",
        "__module__": __name__,
    }
    made: type = decorator(**options)(type(f"Record{i}", (), namespace))
    return made


def define_classes(n: int) -> list[object]:
    """``n`` frozen, slotted dataclasses of four fields, each instantiated once."""
    return [record_class(i, frozen=True, slots=True)(i, "x") for i in range(n)]


def run_sync(argv: list[str]) -> int:
    import subprocess

    call_id = os.urandom(6).hex()
    db = open_store("floor.db")
    commit(db, call_id, {"command": " ".join(argv), "state": "running"})
    fd, total, tail = spill_file(call_id), 0, b""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    while chunk := proc.stdout.read1(65536):
        os.write(fd, chunk)
        total, tail = total + len(chunk), (tail + chunk)[-WINDOW:]
    os.close(fd)
    return settle(db, call_id, " ".join(argv), proc.wait(), total, tail)


def run_async(argv: list[str]) -> int:
    import asyncio

    async def main() -> int:
        call_id = os.urandom(6).hex()
        db = open_store("floor.db")
        commit(db, call_id, {"command": " ".join(argv), "state": "running"})
        fd, total, tail = spill_file(call_id), 0, b""
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            os.write(fd, chunk)
            total, tail = total + len(chunk), (tail + chunk)[-WINDOW:]
        os.close(fd)
        return settle(db, call_id, " ".join(argv), await proc.wait(), total, tail)

    return asyncio.run(main())


if __name__ == "__main__":
    args = sys.argv[1:]
    sync = args[:1] == ["--sync"]
    if sync:
        args = args[1:]
    if args[:1] == ["--classes"]:
        define_classes(int(args[1]))
        args = args[2:]
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        raise SystemExit("usage: startup_floor.py [--sync] [--classes N] -- COMMAND...")
    status = run_sync(args) if sync else run_async(args)
    # Ends as `toolfold run` does once its call has settled: output flushed, without the
    # interpreter's teardown (which a process about to end need not pay).
    sys.stdout.flush()
    os._exit(status)
