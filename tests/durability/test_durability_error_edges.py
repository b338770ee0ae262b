"""The durability layer's errors (found by mutation testing, docs/TESTING.md): a fenced
write is also a storage conflict, and carries the conflict's address and tokens, so code
that handles any ``ConflictError`` learns what was refused."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from toolfold.durability import DurabilityError, FencedError, acquire_lease, lease_token
from toolfold.storage import ConflictError, MemoryRepository, Session


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    repo = MemoryRepository()
    s = await repo.open_session("s", create=True)
    try:
        yield s
    finally:
        await repo.close()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_fenced_write_is_a_conflict_on_the_lease_token(session: Session) -> None:
    clock = Clock()
    a = await acquire_lease(session, "op1", "A", ttl=5, clock=clock)
    clock.now += 6
    await acquire_lease(session, "op1", "B", ttl=5, clock=clock)
    with pytest.raises(ConflictError) as info:
        await a.renew()
    err = info.value
    assert isinstance(err, FencedError) and isinstance(err, DurabilityError)
    assert (err.address, err.expected, err.found) == (lease_token("op1"), 1, 2)
    assert (err.token, err.current_token, err.holder) == (1, 2, "B")
