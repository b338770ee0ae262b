"""The harness: tool definitions, per-call execution, events and the event bus.

``execute_tool_call`` owns one call's lifecycle (validate → sink → run → settle)
and emits ``ToolStart`` / ``ToolUpdate`` (Chord ops, first a base batch) /
``ToolEnd`` / ``ToolSettled``. ``Harness`` runs a run's calls concurrently and owns
the ``EventBus``. ``ExecutionHooks`` is the seam durability plugs into:
``Harness(tools, session=...)`` attaches ``DurableHooks`` (checkpoints, memos,
settlement) and ``await harness.resume()`` finishes what a crash left unsettled.
The durable machinery itself is ``toolfold.durability``; its public names are
re-exported here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._lazy import lazy_exports
from toolfold.durability import (
    DEFAULT_CHECKPOINT_INTERVAL,
    DEFAULT_REBASE_EVERY,
    MISSING,
    Durability,
    DurabilityError,
    DurableStream,
    MemoError,
    OpSource,
    RecoveryError,
    TrackerSource,
    operation_tool_memo,
    pending_assistant_output,
    pending_tool_output,
)

from ._background_call import (
    BACKGROUND_KIND,
    BACKGROUND_TOOL,
    background_settled,
    orphan_notes,
)
from ._bus import DEFAULT_MAX_QUEUE, EventBus, Listener, Subscription
from ._call_checks import format_validation_error
from ._context import ExecEnv, MemoBackend, ToolContext
from ._durable_hooks import DurableHooks, ResumeHost, resume
from ._errors import (
    BusClosedError,
    HarnessError,
    MemoUnavailableError,
    SubscriberOverflowError,
    ToolDefinitionError,
    ToolError,
    ToolNotAvailableError,
)
from ._execute import Harness, Pacing, execute_tool_call
from ._hooks import CallInfo, ExecutionHooks, ToolCall
from ._result import (
    CANCELLED_MARKER,
    INTERRUPTION_MARKER,
    Outcome,
    ToolResult,
    ToolResultMessage,
)
from ._tool_body import DEFAULT_CANCEL_GRACE
from ._tools import ExecuteFn, Tool, tool
from .events import (
    HarnessEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    RunEnd,
    RunStart,
    ToolEnd,
    ToolSettled,
    ToolStart,
    ToolUpdate,
)

if TYPE_CHECKING:
    from toolfold.durability import RecoveredStream, recover

    from ._assistant import MessageWriter
    from ._janitor import resume_orphans
    from ._lane import (
        LaneBatch,
        LaneClosedError,
        LaneError,
        LaneHost,
        LaneOperation,
        Lanes,
        LaneSubscription,
        LaneTool,
        LaneView,
        new_lane_view,
        reduce_lane_snapshot,
    )
    from ._loop import ToolLoop, model_images

# The model loop, assistant messages, the janitor and the lanes are imported on first
# use: `toolfold run` drives one call and needs none of them (docs/BENCHMARKS.md).
__getattr__ = lazy_exports(
    __name__,
    {
        # recovery, from the durability layer: a call that settles needs none of it
        "RecoveredStream": "toolfold.durability._recovery",
        "recover": "toolfold.durability._recovery",
        "MessageWriter": "._assistant",
        "resume_orphans": "._janitor",
        "ToolLoop": "._loop",
        "model_images": "._loop",
        **dict.fromkeys(
            [
                "LaneBatch",
                "LaneClosedError",
                "LaneError",
                "LaneHost",
                "LaneOperation",
                "Lanes",
                "LaneSubscription",
                "LaneTool",
                "LaneView",
                "new_lane_view",
                "reduce_lane_snapshot",
            ],
            "._lane",
        ),
    },
)

__all__ = [
    "BACKGROUND_KIND",
    "BACKGROUND_TOOL",
    "CANCELLED_MARKER",
    "DEFAULT_CANCEL_GRACE",
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_REBASE_EVERY",
    "INTERRUPTION_MARKER",
    "MISSING",
    "BusClosedError",
    "CallInfo",
    "Durability",
    "DurabilityError",
    "DurableHooks",
    "DurableStream",
    "EventBus",
    "ExecEnv",
    "ExecuteFn",
    "ExecutionHooks",
    "Harness",
    "HarnessError",
    "HarnessEvent",
    "Listener",
    "MemoBackend",
    "MemoError",
    "MemoUnavailableError",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "MessageWriter",
    "OpSource",
    "Outcome",
    "Pacing",
    "RecoveredStream",
    "RecoveryError",
    "ResumeHost",
    "RunEnd",
    "RunStart",
    "SubscriberOverflowError",
    "Subscription",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolDefinitionError",
    "ToolEnd",
    "ToolError",
    "ToolLoop",
    "ToolNotAvailableError",
    "ToolResult",
    "ToolResultMessage",
    "ToolSettled",
    "ToolStart",
    "ToolUpdate",
    "TrackerSource",
    "background_settled",
    "execute_tool_call",
    "format_validation_error",
    "model_images",
    "operation_tool_memo",
    "orphan_notes",
    "pending_assistant_output",
    "pending_tool_output",
    "recover",
    "resume",
    "resume_orphans",
    "tool",
]

# --- lane reduction and the lane host (replication) ------------------------------------

__all__ += [
    "LaneBatch",
    "LaneClosedError",
    "LaneError",
    "LaneHost",
    "LaneOperation",
    "LaneSubscription",
    "LaneTool",
    "LaneView",
    "Lanes",
    "new_lane_view",
    "reduce_lane_snapshot",
]
