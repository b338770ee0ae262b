"""Crash-kill of ``toolfold run``'s direct driver: SIGKILL it at its storage call #k, let
``toolfold resume`` finish what it left, and check the invariants (docs/durability.md).

``kill_point(root, k, command)`` forks a child that runs the driver on a SQLite store in
``root`` with its session wrapped so that it kills itself right before storage call #k
(0: never), waits for it, resumes the session in this process as ``toolfold resume``
does, and returns what was checked. The child appends one line per commit to a trace
(one ``os.write`` each, so it survives the kill): ``plan`` with the commit's kind (and,
for a checkpoint, the output state it makes durable) before it, ``done`` once it
returned. A resumed call must hold exactly the last checkpoint committed before the kill
(or one in flight at it) + the interruption marker: the main crash-kill check's
invariant, read from the trace by its own ``read_trace``.

Used by ``test_durability_crashkill_direct.py`` (a CI-sized sweep) and
``benchmarks/bench_crashkill.py --direct`` (>= 1,000 points)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SESSION = "direct"
SHORT = "printf 'one\\ntwo\\n'"
"""A call that ends inside its first checkpoint interval: written by its settlement alone."""
LONG = "for i in $(seq 1 40); do echo line $i; sleep 0.005; done"
"""A call that runs past several (short) checkpoint intervals and heartbeats."""
INTERVAL = 0.02
TTL = 0.15  # a heartbeat every 0.05 s

LONG_LINES = [f"line {i}" for i in range(1, 41)]
SHORT_LINES = ["one", "two"]


def _kind(writes: Any, across: bool) -> str:
    from toolfold.storage import AppendEntry, AppendList

    if across:
        return "start"
    if any(isinstance(w, AppendEntry) for w in writes):
        return "settle"
    if any(isinstance(w, AppendList) for w in writes):
        return "checkpoint"
    return "renew"


CALL = "call"
"""The key of the call's states in the trace (``crashkill_check.read_trace``'s format)."""


def _child(root: Path, kill_at: int, command: str) -> None:
    import toolfold.durability
    from toolfold.cli import _run_direct
    from toolfold.cli._run_result import TEST_INTERVAL_VAR
    from toolfold.cli._store import resolve_store
    from toolfold.output import OutputPolicy
    from toolfold.storage import _sqlite_sync

    planners: list[Any] = []

    class Planner(toolfold.durability.StreamPlanner):  # type: ignore[misc, name-defined]
        def __init__(self, *a: Any, **k: Any) -> None:
            super().__init__(*a, **k)
            planners.append(self)

    # The driver imports it when it runs: it plans with this one, which lets the trace
    # record the producer's state each checkpoint commits.
    toolfold.durability.StreamPlanner = Planner  # type: ignore[attr-defined, misc]

    trace = os.open(root / "trace.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    calls = [0]

    def tick() -> int:
        calls[0] += 1
        if calls[0] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return calls[0]

    def line(**event: Any) -> None:
        os.write(trace, (json.dumps(event) + "\n").encode())

    base = _sqlite_sync.SyncSqliteSession

    class Killing(base):  # type: ignore[misc, valid-type]
        def commit(self, writes: Any, **kw: Any) -> Any:
            n = tick()
            planned = writes() if callable(writes) else writes
            kind = _kind(planned, False)
            # As crashkill_child.py traces it: the state a checkpoint makes durable (the
            # sink's, which the batch just planned brought the stream up to).
            lists = (
                {CALL: planners[0].source._sink._current_target()} if kind == "checkpoint" else {}
            )
            line(ev="plan", n=n, kind=kind, lists=lists, memo=[])
            result = super().commit(planned, **kw)
            line(ev="done", n=n)
            return result

        def commit_across(self, main: Any, side: Any, **kw: Any) -> Any:
            n = tick()
            line(ev="plan", n=n, kind="start", lists={}, memo=[])
            result = super().commit_across(main, side, **kw)
            line(ev="done", n=n)
            return result

        def get_value(self, *a: Any, **k: Any) -> Any:
            tick()
            return super().get_value(*a, **k)

    _sqlite_sync.SyncSqliteSession = Killing  # type: ignore[misc]
    os.environ[TEST_INTERVAL_VAR] = str(INTERVAL)  # the interval both run drivers read
    # Nothing of the child's output matters: the store is what is checked.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    spec = resolve_store(f"sqlite:{root / 'store' / 'toolfold.db'}")
    status = _run_direct.run_direct(
        spec, SESSION, command, OutputPolicy(retain="tail"), 1 << 30, TTL
    )
    line(ev="complete", calls=calls[0], status=status)


@dataclass
class Outcome:
    """What one kill point left, after the resume."""

    killed: bool
    started: bool
    settled_before: bool
    resumed: bool
    calls: int
    violations: list[str]


def _preload() -> None:
    """Pay the driver's imports once, before forking: each child inherits them, and the
    codec a real direct run uses (the standard library's json: ``run_bare`` prefers it
    before it imports storage)."""
    from toolfold import _json

    _json.prefer_standard_library()
    import toolfold.cli._inspect
    import toolfold.cli._run_direct
    import toolfold.cli._run_result
    import toolfold.cli._view
    import toolfold.execenv._session
    import toolfold.harness.events
    import toolfold.storage._sqlite_sync
    import toolfold.tools.bash  # noqa: F401


def kill_point(root: Path, kill_at: int, command: str = SHORT) -> Outcome:
    """Run, kill at storage call ``kill_at``, resume, check (see the module doc)."""
    _preload()
    root.mkdir(parents=True)
    (root / "store").mkdir()
    pid = os.fork()
    if pid == 0:  # the child: run, never return into the caller
        code = 3
        try:
            _child(root, kill_at, command)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    events = [json.loads(x) for x in (root / "trace.jsonl").read_text().splitlines() if x]
    done = {e["n"] for e in events if e["ev"] == "done"}
    kinds = {e["n"]: e["kind"] for e in events if e["ev"] == "plan"}
    started = any(kinds.get(n) == "start" for n in done)
    settled_before = any(kinds.get(n) == "settle" for n in done)
    calls = next((e["calls"] for e in events if e["ev"] == "complete"), 0)
    violations: list[str] = []
    if not killed and kill_at and not any(e["ev"] == "complete" for e in events):
        violations.append(f"the child ended with status {status} without being killed")
    db = root / "store" / "toolfold.db"
    resumed = False
    if db.exists() and started:
        resumed = not settled_before
        _resume(root, db)
    violations += _check(
        db,
        started=started,
        settled_before=settled_before,
        command=command,
        trace=root / "trace.jsonl",
    )
    return Outcome(killed, started, settled_before, resumed, calls, violations)


def _resume(root: Path, db: Path) -> None:
    from toolfold.cli._inspect import resume_command
    from toolfold.cli._store import resolve_store

    spec = resolve_store(f"sqlite:{db}")
    with contextlib.redirect_stdout(io.StringIO()):
        asyncio.run(resume_command(spec, SESSION))


def _check(
    db: Path, *, started: bool, settled_before: bool, command: str, trace: Path
) -> list[str]:
    from crashkill_check import interrupted_text, read_trace

    from toolfold.harness import INTERRUPTION_MARKER

    if not db.exists():
        return [] if not started else ["the store is gone"]
    conn = sqlite3.connect(db)
    try:
        entries = [json.loads(v) for (v,) in conn.execute("SELECT value FROM entries")]
        live = (
            conn.execute("SELECT count(*) FROM kv_values WHERE scope_id != ''").fetchone()[0]
            + conn.execute("SELECT count(*) FROM list_elements WHERE scope_id != ''").fetchone()[0]
        )
        leases = dict(
            conn.execute(
                "SELECT namespace || '/' || key, value FROM kv_values "
                "WHERE namespace IN ('lease.token', 'lease.holder')"
            ).fetchall()
        )
        records = conn.execute("SELECT count(*) FROM kv_values WHERE namespace = 'cli.run'")
        run_records = records.fetchone()[0]
    finally:
        conn.close()
    problems: list[str] = []
    if not started:
        if entries or live or leases or run_records:
            problems.append("a start that never committed left records")
        return problems
    if len(entries) != 1:
        problems.append(f"{len(entries)} transcript entries for one call (settled once?)")
        return problems
    if live:
        problems.append(f"{live} records of the operation's scope outlived its settlement")
    tokens = [json.loads(v) for k, v in leases.items() if k.startswith("lease.token/")]
    holders = [k for k in leases if k.startswith("lease.holder/")]
    if holders or len(tokens) != 1 or not isinstance(tokens[0], dict):
        problems.append(f"the lease was not ended by the settlement: {leases}")
    if run_records != 1:
        problems.append(f"{run_records} run records for one call")
    entry = entries[0]
    text = "".join(b.get("text", "") for b in entry.get("content", []) if isinstance(b, dict))
    expected = LONG_LINES if command == LONG else SHORT_LINES
    if settled_before:
        if entry.get("outcome") != "ok" or text.splitlines() != expected:
            problems.append(f"the acknowledged result changed: {entry.get('outcome')} {text!r}")
        return problems
    if entry.get("outcome") != "interrupted" or not text.endswith(INTERRUPTION_MARKER):
        problems.append(f"resumed as {entry.get('outcome')!r}, not interrupted: {text!r:.200}")
        return problems
    kept = text[: -len(INTERRUPTION_MARKER)].splitlines()
    if kept != expected[: len(kept)]:
        problems.append(f"the resumed output is not a prefix of the output: {kept!r:.200}")
    # The main crash-kill check's invariant (crashkill_check.check): the resumed result
    # is the state of the last checkpoint committed before the kill (or of one whose
    # commit was in flight at it) + the marker; never an older one, nothing lost.
    states = read_trace(trace)
    committed = states.committed.get(CALL, [])
    acceptable = [committed[-1] if committed else None, *states.in_flight.get(CALL, [])]
    if text not in [interrupted_text(_text(state)) for state in acceptable]:
        problems.append(
            f"the resumed output is not the last committed checkpoint + marker "
            f"({len(committed)} committed): {text!r:.200}"
        )
    return problems


def _text(state: Any) -> str:
    if not isinstance(state, dict):
        return ""
    return "".join(b.get("text", "") for b in state.get("content", []) if isinstance(b, dict))
