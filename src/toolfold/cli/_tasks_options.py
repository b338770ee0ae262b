"""What ``toolfold mcp --task-*`` asked for (kept apart from ``toolfold.mcp``, which the
CLI imports only when the command runs)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskOptions:
    """When calls become tasks, and how long tasks are kept (milliseconds)."""

    after: float = 1.0
    per_tool: dict[str, float | None] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    ttl_ms: int = 3_600_000
    poll_ms: int = 1000


__all__ = ["TaskOptions"]
