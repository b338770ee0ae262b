"""Crash-kill suite: a child process runs bash (spilling), a memoising multi-step tool and
a details-heavy tool on JSONL, SQLite and PostgreSQL while it streams a durable assistant message,
and SIGKILLs itself at storage call #k (on JSONL also with commit #k's record cut
short); the store is reopened, the operation resumed, and the four invariants of
docs/durability.md checked after every kill — for the message too: recovery shows its
last checkpoint, resume settles it once, as interrupted keeping that text, or whole."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from crashkill_check import ForkServer, run_points

POINTS = 200


@pytest.fixture(scope="module")
def server() -> ForkServer:
    s = ForkServer()
    yield s  # type: ignore[misc]
    s.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jsonl", "sqlite"])
async def test_no_invariant_breaks_at_any_kill_point(
    backend: str, tmp_path: Path, server: ForkServer
) -> None:
    outcomes, seconds = await run_points(backend, tmp_path, POINTS, server=server)
    killed = sum(o.killed for o in outcomes)
    torn = sum(o.torn and o.killed for o in outcomes)
    print(
        f"{backend}: {len(outcomes)} kill points ({killed} killed, {torn} torn) in {seconds:.1f}s"
    )
    assert len(outcomes) == POINTS
    assert killed >= POINTS * 0.6  # the kill points really land inside the run
    if backend == "jsonl":
        assert torn >= POINTS * 0.25
    # Kills really land inside the message's generation: a partial answer is kept.
    assert sum(o.partial_message for o in outcomes) >= POINTS * 0.1
    # And inside the short calls (each written once, by its settlement).
    assert sum(o.killed and o.in_short_call for o in outcomes) >= POINTS * 0.05
    violations = [(o.kill_at, o.torn, v) for o in outcomes for v in o.violations]
    assert violations == []


#: Fewer on PostgreSQL: each kill point gets a database of its own (the benchmark,
#: benchmarks/bench_crashkill.py, runs 500).
PG_POINTS = 60


@pytest.mark.slow
async def test_no_invariant_breaks_at_any_kill_point_on_postgres(
    tmp_path: Path, server: ForkServer, postgres_server: str
) -> None:
    outcomes, _ = await run_points(
        "postgres", tmp_path, PG_POINTS, server=server, pg_server=postgres_server
    )
    assert len(outcomes) == PG_POINTS
    assert sum(o.killed for o in outcomes) >= PG_POINTS * 0.6
    assert sum(o.partial_message for o in outcomes) >= PG_POINTS * 0.1
    violations = [(o.kill_at, v) for o in outcomes for v in o.violations]
    assert violations == []


@pytest.mark.parametrize(
    ("broken", "symptom"),
    [
        ("memo_then_checkpoint", "output lost"),
        ("checkpoint_then_memo", "output duplicated or mixed"),
    ],
)
async def test_the_suite_catches_the_ordered_memo_designs(
    broken: str, symptom: str, tmp_path: Path, server: ForkServer
) -> None:
    # The same kill points with the memo transaction split into two ordered commits:
    # the checker must report that design's failure mode (so a green run above means
    # something).
    outcomes, _ = await run_points("sqlite", tmp_path, 32, server=server, broken=broken)
    found = collections.Counter(
        v.split(" after")[0] for o in outcomes for v in o.violations if "c-steps: output" in v
    )
    assert found[f"c-steps: {symptom}"] >= 1, found


async def test_the_suite_catches_a_host_record_committed_apart_from_the_settlement(
    tmp_path: Path, server: ForkServer
) -> None:
    # The short calls with the host's settled record in a commit of its own after the
    # settlement (before record_call): a kill between the two leaves a settled call
    # whose record says it never settled, and the checker must say so.
    # Twice over the last 26 calls: under load a paced checkpoint can shift the calls
    # of one run by one, and the kill must still land between the two commits once.
    outcomes, _ = await run_points(
        "sqlite", tmp_path, 60, server=server, broken="record_apart", tail=26
    )
    found = [v for o in outcomes for v in o.violations if "host record" in v]
    assert any("(settled before the kill: True)" in v for v in found), found


async def test_the_suite_catches_a_resume_that_drops_the_partial_answer(
    tmp_path: Path, server: ForkServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Resume settling a crashed message from nothing (as if its checkpoints were
    # not read back): the checker must report the lost text.
    import toolfold.durability._messages as messages

    async def nothing_recovered(*args: object, **kwargs: object) -> None:
        return None

    monkeypatch.setattr(messages, "recover", nothing_recovered)
    outcomes, _ = await run_points("sqlite", tmp_path, 40, server=server)
    found = [v for o in outcomes for v in o.violations if v.startswith("message:")]
    assert "message: the interrupted message is not its last checkpoint (text lost)" in found
