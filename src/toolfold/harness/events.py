"""Harness events: what a running harness tells its subscribers.

Tool output travels only as Chord ops inside ``ToolUpdate``; ``ToolStart``
carries identity, ``ToolEnd`` carries nothing but ``is_error``. The fold of the
updates *is* the result ("the fold is the result"): nothing is re-sent at the end.

``RunStart`` / ``RunEnd`` bracket one operation (a run of tool calls), and
``ToolSettled`` carries the settled ``ToolResultMessage`` that the harness wrote
to the transcript, so a lane view can keep a transcript tail without a second
channel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._lazy import lazy_exports

from ._tool_events import (
    JSON,
    RunEnd,
    RunStart,
    ToolEnd,
    ToolSettled,
    ToolStart,
    ToolUpdate,
)

if TYPE_CHECKING:
    from ._message_events import HarnessEvent, MessageEnd, MessageStart, MessageUpdate

# An assistant message's events, and the union of every event, are defined on first use
# (``_message_events``): a harness that runs tool calls alone (``toolfold run``) never
# emits one, and each frozen event class costs a fraction of a millisecond to define.
__getattr__ = lazy_exports(
    __name__,
    dict.fromkeys(
        ["HarnessEvent", "MessageEnd", "MessageStart", "MessageUpdate"],
        "toolfold.harness._message_events",
    ),
)

__all__ = [
    "JSON",
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
]
