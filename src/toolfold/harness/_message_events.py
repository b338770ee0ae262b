"""The events of an assistant message being generated, and ``HarnessEvent``, the union of
every event a harness emits (``events``, where all of them are imported from: the tool
calls' events are defined there, these on first use)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ._tool_events import JSON, RunEnd, RunStart, ToolEnd, ToolSettled, ToolStart, ToolUpdate


@dataclass(frozen=True, slots=True)
class MessageStart:
    """An assistant message began. Identity only."""

    type: ClassVar[str] = "message_start"
    run_id: str
    turn_id: str
    message_id: str


@dataclass(frozen=True, slots=True)
class MessageUpdate:
    """A batch of Chord ops against the assistant message being generated (its
    ``AssistantMessageState``); the first update of a message is a base batch."""

    type: ClassVar[str] = "message_update"
    run_id: str
    turn_id: str
    message_id: str
    ops: list[list[JSON]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class MessageEnd:
    """The message ended: how (``stop_reason``) and whether it failed. Its content is
    the fold of the updates; nothing is resent."""

    type: ClassVar[str] = "message_end"
    run_id: str
    turn_id: str
    message_id: str
    stop_reason: str
    is_error: bool = False


HarnessEvent = (
    RunStart
    | RunEnd
    | ToolStart
    | ToolUpdate
    | ToolEnd
    | ToolSettled
    | MessageStart
    | MessageUpdate
    | MessageEnd
)
"""Every event a harness emits."""


__all__ = ["HarnessEvent", "MessageEnd", "MessageStart", "MessageUpdate"]
