"""The central durability behaviours once more on PostgreSQL (the shared throwaway
cluster of tests/pg_fixture.py): bundled memos at every crash point, recovery after a
restart, seeded replay, and the settlement fence."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from durability_helpers import Store
from test_durability_harness import (
    Gates,
    Tap,
    _late_write_after_settlement,
    crash_during,
    harness_for,
    make_stepper,
)
from test_durability_memo import EXPECTED, STEPS, bundled, crash_and_replay

from toolfold.harness import ToolCall, resume


@pytest.fixture
async def pg(postgres_url: str, tmp_path: Path) -> AsyncIterator[Store]:
    s = Store("postgres", tmp_path, postgres_url)
    try:
        yield s
    finally:
        await s.aclose()


async def test_pg_bundled_memo_is_exact_at_every_crash_point(pg: Store) -> None:
    for crash_at in range(1, STEPS + 2):
        assert await crash_and_replay(pg, bundled, crash_at) == EXPECTED


async def test_pg_replay_safe_tool_resumes_seeded(pg: Store) -> None:
    inner = await pg.session()
    tap = Tap(inner)
    gates = Gates()
    h = harness_for(tap, [make_stepper(gates, steps=3, crash_after=0)])
    await crash_during(tap, h.run([ToolCall("c1", "stepper")], run_id="op1"), gates.reached)
    session = await pg.restart(tap)
    [r] = await resume(harness_for(session, [make_stepper(Gates(), steps=3, crash_after=None)]))
    assert r.text == "step 0 output\nstep 1 output\nstep 2 output\n"
    assert await session.live_scopes() == []


async def test_pg_fence_stops_late_progress(pg: Store) -> None:
    assert await _late_write_after_settlement(pg) == []
