"""Fixtures of the storage tests: one ``store`` per backend (see storage_backends.py).

The PostgreSQL server fixture itself lives in ``tests/pg_fixture.py`` (shared with the
durability and CLI tests).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from storage_backends import BACKENDS, Store

from toolfold.storage._jsonl import JsonlRepository


@pytest.fixture(scope="session")
def postgres_shared_db(postgres_server: str) -> Iterator[str]:
    """One database for the storage suite; ``store`` empties it before each test
    (TRUNCATE is ~100x cheaper than CREATE DATABASE per test)."""
    from pg_fixture import fresh_database

    with fresh_database(postgres_server, f"tf_storage_{uuid.uuid4().hex[:12]}") as url:
        yield url


def _empty_postgres(url: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN IF to_regclass('sessions') IS NOT NULL THEN "
            "TRUNCATE sessions, kv_values, list_elements, entries, retirements; "
            "END IF; END $$"
        )
    return url


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh, empty store of each backend in turn."""
    kind: str = request.param
    pg_url = (
        _empty_postgres(request.getfixturevalue("postgres_shared_db"))
        if kind == "postgres"
        else None
    )
    s = Store(kind, tmp_path, pg_url)
    try:
        yield s
    finally:
        await s.aclose()


@pytest.fixture
async def repos() -> AsyncIterator[list[JsonlRepository]]:
    """JSONL repositories a test opens (it appends them); closed at the end, whatever
    happened. A module may define its own ``repos``."""
    made: list[JsonlRepository] = []
    try:
        yield made
    finally:
        for r in made:
            await r.close()
