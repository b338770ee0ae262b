"""The janitor: keep resuming the operations of hosts that died (their lease expired)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import NoReturn

from toolfold.durability import DurabilityError
from toolfold.storage import StorageError

from ._durable_hooks import ResumeHost, resume
from ._result import ToolResult


async def resume_orphans(
    harness: ResumeHost,
    *,
    interval: float,
    on_results: Callable[[list[ToolResult]], None] | None = None,
) -> NoReturn:
    """Every ``interval`` seconds, ``resume(harness, orphans_only=True)``: operations
    whose lease expired (their host died or stalled) are taken over — one conditional
    commit, so of many janitors on many hosts exactly one takes each — and settled or
    replayed; live ones are skipped, and so are unleased ones (nothing tells whether
    their process still runs: ``toolfold resume`` settles those). Runs until cancelled. Give it a harness of its own (its own
    ``DurableHooks``) on the session, next to the harness that runs new calls.

    A failed round (the store unreachable) is reported on stderr and retried next
    round: a janitor that stops silently would leave orphans unsettled."""
    if not interval > 0:
        raise DurabilityError(f"resume_orphans needs an interval > 0 seconds, got {interval!r}")
    while True:
        try:
            results = await resume(harness, orphans_only=True)
        except (DurabilityError, StorageError) as exc:
            print(f"toolfold: resuming orphaned calls failed, retrying: {exc}", file=sys.stderr)
        else:
            if results and on_results is not None:
                on_results(results)
        await asyncio.sleep(interval)
