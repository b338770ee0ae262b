"""An operation found live (unsettled) in a session (:class:`PendingOperation`): what
resume and a janitor work from.

Apart from ``_operations`` because only finding pending operations builds one: a call
that runs and settles never defines it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._calls import CallRecord
    from ._lease_info import LeaseInfo

__all__ = ["PendingOperation"]


@dataclass(frozen=True)
class PendingOperation:
    """An operation found live (unsettled) in a session: what resume works from."""

    operation_id: str
    run_id: str
    calls: tuple[CallRecord, ...]
    settled: frozenset[str]
    """Invocation ids whose result entry is already in the transcript."""
    lease: LeaseInfo | None = None
    """Its lease as stored (``None``: not leased): live means it runs on ``lease.owner``."""
