"""The durability layer's errors (found by mutation testing, docs/TESTING.md): a fenced
write is also a storage conflict, and carries the conflict's address and tokens, so code
that handles any ``ConflictError`` learns what was refused."""

from __future__ import annotations

import pytest
from durability_helpers import Clock

from toolfold.durability import DurabilityError, FencedError, acquire_lease, lease_token
from toolfold.storage import ConflictError, Session


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
