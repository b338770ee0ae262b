"""Fixtures of the durability tests: a store per backend (helpers in durability_helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from durability_helpers import BACKENDS, HeldTimers, Store, hold_timers

from toolfold.durability import Lease
from toolfold.storage import MemoryRepository, Session


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store of each backend in turn."""
    s = Store(request.param, tmp_path)
    try:
        yield s
    finally:
        await s.aclose()


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    """A fresh in-memory session named ``s`` (the edge tests' store)."""
    repo = MemoryRepository()
    s = await repo.open_session("s", create=True)
    try:
        yield s
    finally:
        await repo.close()


@pytest.fixture
async def beats(monkeypatch: pytest.MonkeyPatch) -> HeldTimers:
    """The lease heartbeats' timers of the test, held to be fired by hand."""
    return hold_timers(monkeypatch, Lease)
