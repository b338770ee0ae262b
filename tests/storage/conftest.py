"""Fixtures of the storage tests: one ``store`` per backend (see storage_backends.py).

The PostgreSQL server fixture itself lives in ``tests/pg_fixture.py`` (shared with the
durability and CLI tests).
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from storage_backends import BACKENDS, Store


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh, empty store of each backend in turn."""
    kind: str = request.param
    pg_url = request.getfixturevalue("postgres_url") if kind == "postgres" else None
    s = Store(kind, tmp_path, pg_url)
    try:
        yield s
    finally:
        await s.aclose()
