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

if TYPE_CHECKING:
    from toolfold.durability import (
        DEFAULT_CHECKPOINT_INTERVAL,
        DEFAULT_REBASE_EVERY,
        MISSING,
        Durability,
        DurabilityError,
        DurableStream,
        MemoError,
        OpSource,
        RecoveredStream,
        RecoveryError,
        TrackerSource,
        operation_tool_memo,
        pending_assistant_output,
        pending_tool_output,
        recover,
    )

    from . import events as events
    from ._assistant import MessageWriter
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

# Every name is imported on first use, from the module that defines it: the package
# itself imports nothing, so a module of it that needs no event loop (``_result``: the
# settled result and its transcript entry) is imported without asyncio, the events, the
# bus or the hooks, and `toolfold run` loads only the modules of the names it uses (no
# model loop, assistant messages, janitor, lanes or background calls;
# docs/BENCHMARKS.md).
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "DEFAULT_CHECKPOINT_INTERVAL",
                "DEFAULT_REBASE_EVERY",
                "MISSING",
                "Durability",
                "DurabilityError",
                "DurableStream",
                "MemoError",
                "OpSource",
                "RecoveryError",
                "TrackerSource",
                "operation_tool_memo",
                "pending_assistant_output",
                "pending_tool_output",
            ],
            "toolfold.durability",
        ),
        # recovery, from the durability layer: a call that settles needs none of it
        "RecoveredStream": "toolfold.durability._recovery",
        "recover": "toolfold.durability._recovery",
        "MessageWriter": "._assistant",
        **dict.fromkeys(
            ["BACKGROUND_KIND", "BACKGROUND_TOOL", "background_settled", "orphan_notes"],
            "._background_call",
        ),
        **dict.fromkeys(["DEFAULT_MAX_QUEUE", "EventBus", "Listener", "Subscription"], "._bus"),
        "format_validation_error": "._call_checks",
        **dict.fromkeys(["ExecEnv", "MemoBackend", "ToolContext"], "._context"),
        **dict.fromkeys(["DurableHooks", "ResumeHost", "resume"], "._durable_hooks"),
        **dict.fromkeys(
            [
                "BusClosedError",
                "HarnessError",
                "MemoUnavailableError",
                "SubscriberOverflowError",
                "ToolDefinitionError",
                "ToolError",
                "ToolNotAvailableError",
            ],
            "._errors",
        ),
        **dict.fromkeys(["Harness", "Pacing", "execute_tool_call"], "._execute"),
        **dict.fromkeys(["CallInfo", "ExecutionHooks", "ToolCall"], "._hooks"),
        "resume_orphans": "._janitor",
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
        **dict.fromkeys(["ToolLoop", "model_images"], "._loop"),
        **dict.fromkeys(
            [
                "CANCELLED_MARKER",
                "INTERRUPTION_MARKER",
                "Outcome",
                "ToolResult",
                "ToolResultMessage",
            ],
            "._result",
        ),
        "DEFAULT_CANCEL_GRACE": "._tool_body",
        **dict.fromkeys(["ExecuteFn", "Tool", "tool"], "._tools"),
        **dict.fromkeys(
            [
                "HarnessEvent",
                "MessageEnd",
                "MessageStart",
                "MessageUpdate",
                "RunEnd",
                "RunStart",
                "ToolEnd",
                "ToolSettled",
                "ToolStart",
                "ToolUpdate",
            ],
            ".events",
        ),
        "events": ".events",  # the module, as ``toolfold.harness.events``
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
