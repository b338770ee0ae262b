"""Fixtures of the durability tests: a store per backend (helpers in durability_helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from durability_helpers import BACKENDS, Store


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store of each backend in turn."""
    s = Store(request.param, tmp_path)
    try:
        yield s
    finally:
        await s.aclose()
