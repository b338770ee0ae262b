"""What importing durability's planning costs: no asyncio. The addresses, errors, call
records and settlement writes, the lease's and the stream's write planning are what a
caller committing without an event loop needs; the lease heartbeat and the stream's
trailing checkpoint import asyncio when they first run."""

from __future__ import annotations

import subprocess
import sys

import pytest

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
    code = (
        f"import {module}\n"
        "from toolfold.durability import CallRecord, settle_writes\n"
        "import sys\n"
        "print('\\n'.join(sys.modules))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    loaded = set(proc.stdout.split())
    assert module in loaded
    assert "asyncio" not in loaded
    assert "toolfold.storage._base" not in loaded
    # a lease as read back is defined when a lease is first read
    assert "toolfold.durability._lease_info" not in loaded
    assert "toolfold.durability._pending" not in loaded
