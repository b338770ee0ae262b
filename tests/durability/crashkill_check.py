"""Drive the crash-kill child and check the four invariants of docs/durability.md after
each kill: shared by the CI test (test_durability_crashkill.py) and the benchmark
(benchmarks/bench_crashkill.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crashkill_child as child
import orjson

from toolfold.durability import (
    Durability,
    load_memo_seed,
    pending_assistant_output,
    pending_messages,
    pending_tool_output,
    recover,
)
from toolfold.harness import INTERRUPTION_MARKER, DurableHooks, resume
from toolfold.storage import open_repository, value

CHILD = Path(child.__file__).resolve()


class ForkServer:
    """The child in ``serve`` mode: one interpreter, one fork per kill point."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"crash-kill fork server died (exit {self.proc.poll()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@dataclass
class Outcome:
    """What one kill point did and which invariants it broke."""

    kill_at: int
    torn: bool
    killed: bool
    violations: list[str] = field(default_factory=list)
    partial_message: bool = False
    """Resume settled the assistant message as interrupted with some text kept."""
    in_short_call: bool = False
    """The kill landed while the short calls ran (the child's last phase)."""


def store_url(backend: str, directory: Path, pg_server: str | None = None) -> str:
    """A fresh store for one kill point (on PostgreSQL: a new database on ``pg_server``,
    dropped by :func:`drop_store`)."""
    root = directory / "store"
    root.mkdir(parents=True, exist_ok=True)
    if backend == "jsonl":
        return f"jsonl:{root}"
    if backend == "sqlite":
        return f"sqlite:{root / 'store.db'}"
    if backend == "postgres":
        if pg_server is None:
            raise ValueError("crash-kill on postgres needs a server DSN (pg_server)")
        import psycopg

        from pg_fixture import with_dbname

        name = f"ck_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return with_dbname(pg_server, name)
    raise ValueError(f"crash-kill runs on jsonl, sqlite or postgres, not {backend!r}")


def drop_store(url: str, pg_server: str | None) -> None:
    """Drop a kill point's PostgreSQL database (other stores live in its directory)."""
    if pg_server is None or not url.startswith("postgresql:"):
        return
    import psycopg
    import psycopg.conninfo

    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@dataclass
class Trace:
    """What the killed child's trace says about each invocation's durable batches."""

    committed: dict[str, list[Any]]
    """Producer states of batches whose commit returned, in commit order."""
    in_flight: dict[str, list[Any]]
    """States of batches planned after the last returned commit whose commit had not
    returned when the process died (durable or not: both are correct outcomes)."""
    memo: dict[str, list[Any]]
    """Acceptable memo seeds: the last returned memo commit's state, then in-flight ones."""
    started: bool
    complete: bool
    calls: int
    message: dict[str, str] = field(default_factory=dict)
    """The assistant message's ``start`` / ``settle`` commits: ``"done"`` (returned) or
    ``"in_flight"`` (planned, not returned at the kill); absent: never planned."""
    starts: dict[str, str] = field(default_factory=dict)
    """Each call's operation start, the same way."""
    short_phase: bool = False
    """The child had begun its short calls."""


def read_trace(path: Path) -> Trace:
    """Parse a child's trace (see crashkill_child.py)."""
    plans: dict[int, dict[str, Any]] = {}
    done: set[int] = set()
    torn: set[int] = set()
    complete, calls, short_phase = False, 0, False
    if path.exists():
        for raw in path.read_bytes().splitlines():
            rec = orjson.loads(raw)
            if rec["ev"] == "plan":
                plans[rec["n"]] = rec
            elif rec["ev"] == "done":
                done.add(rec["n"])
            elif rec["ev"] == "torn":
                torn.add(rec["n"])
            elif rec["ev"] == "complete":
                complete, calls = True, rec["calls"]
            elif rec["ev"] == "short":
                short_phase = True
    committed: dict[str, list[Any]] = {}
    in_flight: dict[str, list[Any]] = {}
    memo: dict[str, list[Any]] = {}
    message: dict[str, str] = {}
    starts: dict[str, str] = {}
    for n in sorted(plans):
        if n in torn:
            continue  # cut short before the kill: must not be durable
        for what in plans[n].get("msg", []):
            message[what] = "done" if n in done else "in_flight"
        for cid in plans[n].get("started", []):
            starts[cid] = "done" if n in done else "in_flight"
        for inv, state in plans[n]["lists"].items():
            if n in done:
                committed.setdefault(inv, []).append(state)
                in_flight.pop(inv, None)
            else:
                in_flight.setdefault(inv, []).append(state)
        for inv in plans[n]["memo"]:
            state = plans[n]["lists"][inv]
            if n in done:
                memo[inv] = [state]
            else:
                memo.setdefault(inv, [None]).append(state)
    return Trace(
        committed, in_flight, memo, 1 in done, complete, calls, message, starts, short_phase
    )


def interrupted_text(text: str) -> str:
    return text + ("\n" if text and not text.endswith("\n") else "") + INTERRUPTION_MARKER


async def check(
    backend: str, directory: Path, req: dict[str, Any], out: Outcome | None = None
) -> list[str]:
    """Reopen the store a killed child left, resume, and return invariant violations
    (``out.partial_message`` says whether a partial answer was kept)."""
    v: list[str] = []
    trace = read_trace(directory / "trace.jsonl")
    repo = open_repository(req["url"])
    try:
        session = await repo.open_session(child.SESSION)
        durability = Durability(session, interval=0.0)
        recovered: dict[str, Any] = {}
        for pending in await durability.pending_operations():
            for call in pending.calls:
                inv = call.invocation_id
                if inv in pending.settled:
                    continue
                got = await recover(session, pending_tool_output(pending.operation_id, inv))
                value = None if got is None else got.value
                recovered[inv] = value
                committed = trace.committed.get(inv, [])
                acceptable = [committed[-1] if committed else None, *trace.in_flight.get(inv, [])]
                if value not in acceptable:
                    # Invariants 3 and 4: the recovered state is the producer's state at
                    # the last committed durable batch (or one whose commit was in flight
                    # at the kill) — never a mixture, never an older one.
                    older = value in committed
                    v.append(
                        f"{inv}: recovered state is not the last committed batch "
                        f"({'an older batch' if older else 'no producer state at all'})"
                    )
                seed = await load_memo_seed(session, pending.operation_id, inv)
                if seed not in trace.memo.get(inv, [None]):
                    v.append(
                        f"{inv}: memo seed differs from the state committed with the last memo"
                    )
        recovered_message = await _check_recovered_message(session, trace, v)
        settled_before = {
            e.value.get("tool_call_id") or e.value.get("message_id")
            for e in await session.read_entries()
        }
        harness = child.build_harness(session, directory, DurableHooks(durability))
        await resume(harness)
        entries: dict[str, list[Any]] = {}
        messages: list[Any] = []
        for e in await session.read_entries():
            if e.value.get("role") == "assistant":
                messages.append(e.value)
            else:
                entries.setdefault(e.value["tool_call_id"], []).append(e.value)
        _check_settled_message(req, trace, messages, settled_before, recovered_message, v)
        if out is not None:
            out.in_short_call = trace.short_phase and not trace.complete
            out.partial_message = any(
                m["stop_reason"] == "interrupted"
                and any(p.get("type") == "text" and p.get("text") for p in m["content"])
                for m in messages
            )
        for call in child.calls(req["seed"]):
            if not trace.started and not entries:
                break  # killed before the operation was recorded: it never started
            if len(entries.get(call.id, [])) != 1:
                v.append(f"{call.id}: {len(entries.get(call.id, []))} result entries, want 1")
        steps = entries.get("c-steps", [None])[0]
        if steps is not None:
            text = steps["content"][0]["text"]
            want = child.expected_steps_text(req["seed"])
            if text != want:
                # Invariants 1 and 2: nothing written before a committed memo is lost,
                # memoised work is not emitted twice.
                kind = "lost" if len(text) < len(want) else "duplicated or mixed"
                v.append(f"c-steps: output {kind} after resume ({len(text)} vs {len(want)} chars)")
            if steps["details"] != child.expected_steps_details():
                v.append(f"c-steps: details {steps['details']!r}")
            if steps.get("usage") != {
                "input_tokens": 3 * child.STEPS,
                "output_tokens": child.STEPS,
            }:
                v.append(f"c-steps: usage {steps.get('usage')!r}")
        for cid in ("c-details", "c-bash"):
            entry = entries.get(cid, [None])[0]
            if entry is None:
                continue
            if cid in settled_before or cid not in recovered:
                if entry["is_error"]:
                    v.append(
                        f"{cid}: settled before the crash with an error: {entry['content']!r:.200}"
                    )
                continue
            state = recovered[cid]
            text = "" if state is None else state["content"][0]["text"]
            if entry["content"][0]["text"] != interrupted_text(text):
                v.append(f"{cid}: interrupted result is not the checkpoint + marker")
            if entry["outcome"] != "interrupted" or not entry["is_error"]:
                v.append(f"{cid}: settled as {entry['outcome']!r}, want 'interrupted'")
            if state is not None and entry["details"] != state["details"]:
                v.append(f"{cid}: details differ from the checkpoint")
            spill = None if state is None else state.get("spill_path")
            if spill is not None and not Path(spill).exists():
                v.append(f"{cid}: spill file {spill} named in the checkpoint is missing")
        await _check_short_calls(session, trace, entries, settled_before, recovered, v)
        if await session.live_scopes():
            v.append(f"live scopes left after resume: {await session.live_scopes()!r}")
        await session.close()
    except Exception as exc:  # a crash of the checker is a violation, with its reason
        v.append(f"reopen/resume failed: {type(exc).__name__}: {exc}")
    finally:
        await repo.close()
    return v


async def _check_short_calls(
    session: Any,
    trace: Trace,
    entries: dict[str, list[Any]],
    settled_before: set[Any],
    recovered: dict[str, Any],
    v: list[str],
) -> None:
    """The short calls: settled exactly once if their start was durable; whole if their
    settlement committed before the kill, else interrupted with what recovery showed;
    the host's record there iff the start was, its totals iff the settlement was."""
    for i in range(child.SHORT_CALLS):
        cid = child.short_call(i).id
        start = trace.starts.get(cid)
        wanted = {"done": (1,), "in_flight": (0, 1)}.get(start or "", (0,))
        got = entries.get(cid, [])
        if len(got) not in wanted:
            v.append(f"{cid}: {len(got)} result entries, want {wanted} (start {start})")
        record = await session.get_value(value(child.RECORD_NAMESPACE, cid))
        if got and record is None:
            v.append(f"{cid}: settled, but the host's record of its start is missing")
        if not got:
            continue
        entry = got[0]
        settled = cid in settled_before
        if record is not None and record != child.short_record(cid, settled):
            v.append(f"{cid}: host record {record!r} (settled before the kill: {settled})")
        if settled:
            if entry["is_error"] or entry["content"][0]["text"] != child.short_text(i):
                v.append(f"{cid}: settled before the kill as {entry['content']!r:.120}")
            continue
        state = recovered.get(cid)
        text = "" if state is None else state["content"][0]["text"]
        if entry["content"][0]["text"] != interrupted_text(text) or not entry["is_error"]:
            v.append(f"{cid}: interrupted result is not its last checkpoint + marker")


async def _check_recovered_message(session: Any, trace: Trace, v: list[str]) -> Any:
    """The partial message recovery shows: the message's state at its last committed
    checkpoint (or one in flight at the kill). Returns it (``None``: nothing yet, or
    no pending message)."""
    pending = await pending_messages(session)
    if len(pending) > 1:
        v.append(f"{len(pending)} pending assistant messages, want at most 1")
    value = None
    for p in pending:
        got = await recover(session, pending_assistant_output(p.operation_id, p.message_id))
        value = None if got is None else got.value
        committed = trace.committed.get(child.MESSAGE_ID, [])
        acceptable = [
            committed[-1] if committed else None,
            *trace.in_flight.get(child.MESSAGE_ID, []),
        ]
        if value not in acceptable:
            older = value in committed
            v.append(
                "message: recovered state is not the last committed checkpoint "
                f"({'an older one' if older else 'no producer state at all'})"
            )
    return value


def _check_settled_message(
    req: dict[str, Any],
    trace: Trace,
    messages: list[Any],
    settled_before: set[Any],
    recovered: Any,
    v: list[str],
) -> None:
    """After resume: the message settled exactly once (if its start was durable) —
    whole when its settlement committed, else its checkpoint kept as interrupted."""
    start = trace.message.get("start")
    wanted = {"done": (1,), "in_flight": (0, 1)}.get(start or "", (0,))
    if len(messages) not in wanted:
        v.append(f"message: {len(messages)} transcript entries, want {wanted} (start {start})")
    if not messages:
        return
    entry = messages[0]
    state = {k: entry.get(k) for k in ("content", "stop_reason", "is_error")}
    whole = child.expected_message(req["seed"])
    if entry["stop_reason"] != "interrupted":
        want = {k: whole.get(k) for k in ("content", "stop_reason", "is_error")}
        if state != want:
            v.append("message: settled without interruption but not the whole message")
        return
    if child.MESSAGE_ID in settled_before or trace.message.get("settle") == "done":
        v.append("message: its settlement committed before the kill, yet resume settled it")
    kept = [] if recovered is None else recovered.get("content", [])
    if entry["content"] != kept or entry["is_error"] is not True:
        v.append("message: the interrupted message is not its last checkpoint (text lost)")


async def run_points(
    backend: str,
    base: Path,
    count: int,
    *,
    server: ForkServer | None = None,
    broken: str | None = None,
    pg_server: str | None = None,
    tail: int | None = None,
) -> tuple[list[Outcome], float]:
    """Run ``count`` kill points on ``backend``: kill at every storage call #1..K of a
    calibrated run (plus past the end), with new seeds each pass; on JSONL every other
    pass cuts the record of commit #k short before the kill (a torn write). ``tail``:
    only the last ``tail`` storage calls of the run (its short calls)."""
    own = server is None
    server = server if server is not None else ForkServer()
    started = time.perf_counter()
    try:
        calib = base / "calibrate"
        calib.mkdir(parents=True)
        req = {
            "url": store_url(backend, calib, pg_server),
            "dir": str(calib),
            "kill_at": 0,
            "seed": 0,
        }
        server.run(req)
        drop_store(str(req["url"]), pg_server)
        total = read_trace(calib / "trace.jsonl").calls
        if total == 0:
            raise RuntimeError(f"calibration run on {backend} did not complete (see {calib})")
        first = 1 if tail is None else max(1, total - tail + 1)
        span = total + 3 - first
        outcomes = []
        for i in range(count):
            kill_at = first + i % span
            seed = i // span
            torn = backend == "jsonl" and seed % 2 == 1
            d = base / f"k{i}"
            d.mkdir()
            req = {
                "url": store_url(backend, d, pg_server),
                "dir": str(d),
                "store_root": str(d / "store"),
                "kill_at": kill_at,
                "torn": torn,
                "seed": seed,
                "broken": broken,
            }
            answer = server.run(req)
            out = Outcome(kill_at, torn, answer.get("signal") == 9)
            if answer.get("exit") not in (None, 0):
                out.violations.append(f"child failed with exit {answer['exit']} (not a kill)")
            try:
                out.violations.extend(await check(backend, d, req, out))
            finally:
                drop_store(str(req["url"]), pg_server)
            outcomes.append(out)
            if not out.violations:
                shutil.rmtree(d, ignore_errors=True)
        return outcomes, time.perf_counter() - started
    finally:
        if own:
            server.close()
