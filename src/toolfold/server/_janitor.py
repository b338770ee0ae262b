"""``toolfold serve --resume-orphans``: settle, in every session of the store, the calls
of hosts that died (their lease expired), round after round, for as long as the server runs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from toolfold.harness import Durability, DurabilityError, Harness, ToolResult, resume
from toolfold.storage import StorageError

from ._sessions import SessionPool, session_pool

if TYPE_CHECKING:
    from toolfold.storage import Repository, Session

__all__ = ["OrphanJanitor"]

log = logging.getLogger("toolfold.server")

HarnessFactory = Callable[[str, "Session"], Harness]
"""``factory(session_name, session) -> Harness``: the harness that resumes a session's
orphans (its tools replay what is replay-safe; its hooks must be ``DurableHooks`` on
``session``, leased as this host)."""


class OrphanJanitor:
    """Every ``interval`` seconds, looks through every session of the store for
    operations whose lease expired and resumes them with a harness from ``harness_for``
    (``resume(harness, orphans_only=True)``): the calls of a host that was killed are
    settled (or replayed) by whichever janitor takes each one first — a conditional
    commit, so of many ``serve`` replicas running one, exactly one does. Unleased
    pending calls (nothing tells whether their process still runs) are left alone.

    Each session is first checked through a read-only session, so a session without
    orphans is never opened for writing (a JSONL session would be locked meanwhile).
    A failure in one session is logged and the next session is still looked at; a
    failed round is retried the next: the janitor never stops the server."""

    def __init__(
        self,
        repository: Repository | SessionPool,
        harness_for: HarnessFactory,
        *,
        interval: float,
        on_results: Callable[[str, list[ToolResult]], None] | None = None,
    ) -> None:
        if not interval > 0:
            raise ValueError(f"the janitor needs an interval > 0 seconds, got {interval!r}")
        self.sessions = session_pool(repository)
        self.harness_for = harness_for
        self.interval = interval
        self.on_results = on_results
        self.rounds = 0
        """Rounds completed so far (a round looks at every session once)."""

    async def sweep(self) -> list[ToolResult]:
        """One round: resume the orphans of every session; returns what was settled."""
        settled: list[ToolResult] = []
        for name in await self.sessions.list_sessions():
            try:
                results = await self._sweep_session(name)
            except (StorageError, DurabilityError) as exc:
                log.warning("resuming orphaned calls of session %r failed, retrying: %s", name, exc)
                continue
            except Exception:  # one bad session never keeps the others unsettled
                log.exception("resuming orphaned calls of session %r failed, retrying", name)
                continue
            if results and self.on_results is not None:
                self.on_results(name, results)
            settled += results
        self.rounds += 1
        return settled

    async def _sweep_session(self, name: str) -> list[ToolResult]:
        async with self.sessions.use(name) as reader:
            if not await Durability(reader).orphaned_operations():
                return []
        async with self.sessions.use(name, create=True) as session:
            return await resume(self.harness_for(name, session), orphans_only=True)

    async def run(self) -> None:
        """Sweep every ``interval`` seconds until cancelled."""
        while True:
            try:
                await self.sweep()
            except (StorageError, DurabilityError) as exc:  # listing the sessions failed
                log.warning("resuming orphaned calls failed, retrying: %s", exc)
            except Exception:  # a bug must not take the server down with it
                log.exception("resuming orphaned calls failed, retrying")
            await asyncio.sleep(self.interval)
