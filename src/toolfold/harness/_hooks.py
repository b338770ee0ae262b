"""The call-lifecycle seam: ``ToolCall``, ``CallInfo`` and ``ExecutionHooks``.

Kept apart from ``_execute`` so that what plugs into the lifecycle (the durable
hooks) imports this module, and ``_execute`` imports them, without a circle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfold.output import ToolOutput, ToolOutputState

    from ._context import ToolContext
    from ._result import ToolResult


@dataclass(frozen=True)
class CallInfo:
    """Identity of one call, as hooks see it."""

    run_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    args: Any
    replay_safe: bool
    kind: str | None = None
    """See ``ToolResult.kind`` (``"background"``: a command's output, not a model's call)."""


class ExecutionHooks:
    """The seam where durability plugs into the call lifecycle. Every method is a no-op
    here; override what you need.

    Order for one call: ``seed_for`` → sink created (live stream opened) →
    ``on_sink_created`` (open a durable stream, attach memos to the context) → the
    tool runs → the sink settles, the final live update is forced →
    ``before_settle`` (forced durable flush + settlement transaction) → ``ToolEnd``
    → ``ToolSettled``.
    """

    async def on_run_start(
        self, run_id: str, calls: Sequence[ToolCall], *, turn_id: str = ""
    ) -> None:
        """A run (of turn ``turn_id``) is about to start these calls."""

    async def on_run_end(self, run_id: str) -> None:
        """Every call of the run has settled."""

    async def seed_for(self, call: CallInfo) -> ToolOutputState | None:
        """A recovered state to seed the call's sink with (replay), or None."""
        return None

    async def on_sink_created(
        self, call: CallInfo, sink: ToolOutput, context: ToolContext
    ) -> ToolContext:
        """The sink exists; return the context the tool gets (e.g. with memos attached)."""
        return context

    async def before_settle(self, call: CallInfo, sink: ToolOutput, result: ToolResult) -> None:
        """The sink has settled and ``result`` is final; ``ToolEnd`` follows."""


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for."""

    id: str
    name: str
    args: Any = field(default_factory=dict)
