"""What importing durability's planning costs: no asyncio. The addresses, errors, call
records and settlement writes, the lease's and the stream's write planning are what a
caller committing without an event loop needs; the lease heartbeat and the stream's
trailing checkpoint import asyncio when they first run."""

from __future__ import annotations

import pytest

from fresh_modules import modules_after

SYNC_MODULES = (
    "toolfold.durability",
    "toolfold.durability._addresses",
    "toolfold.durability._calls",
    "toolfold.durability._errors",
    "toolfold.durability._leases",
    "toolfold.durability._memos",
    "toolfold.durability._operations",
    "toolfold.durability._stream",
)


@pytest.mark.parametrize("module", SYNC_MODULES)
def test_planning_imports_without_asyncio(module: str) -> None:
    loaded = modules_after(
        f"import {module}\nfrom toolfold.durability import CallRecord, settle_writes"
    )
    assert module in loaded
    assert "asyncio" not in loaded
    assert "toolfold.storage._base" not in loaded
    # a lease as read back is defined when a lease is first read
    assert "toolfold.durability._lease_info" not in loaded
    assert "toolfold.durability._pending" not in loaded
