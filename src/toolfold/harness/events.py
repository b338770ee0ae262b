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

from dataclasses import dataclass, field
from typing import Any, ClassVar

JSON = Any
"""A JSON value: None, bool, int, float, str, list of JSON, dict of str to JSON."""


@dataclass(frozen=True, slots=True)
class RunStart:
    """An operation (one run of the harness over a set of tool calls) began."""

    type: ClassVar[str] = "run_start"
    run_id: str
    lane: str = "default"


@dataclass(frozen=True, slots=True)
class RunEnd:
    """The operation ended; every tool call in it has settled."""

    type: ClassVar[str] = "run_end"
    run_id: str


@dataclass(frozen=True, slots=True)
class ToolStart:
    """A tool call began. Identity only: no caps, no initial state."""

    type: ClassVar[str] = "tool_start"
    run_id: str
    turn_id: str
    tool_call_id: str
    tool_name: str
    args: JSON = None


@dataclass(frozen=True, slots=True)
class ToolUpdate:
    """A batch of Chord ops against the call's ``ToolOutputState``.

    The first update of a call is a base batch (it starts with ``["r", state]``).
    """

    type: ClassVar[str] = "tool_update"
    run_id: str
    turn_id: str
    tool_call_id: str
    ops: list[list[JSON]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ToolEnd:
    """The tool call finished. Carries nothing but whether it failed."""

    type: ClassVar[str] = "tool_end"
    run_id: str
    turn_id: str
    tool_call_id: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class ToolSettled:
    """The settled ``ToolResultMessage`` (a JSON object) written to the transcript."""

    type: ClassVar[str] = "tool_settled"
    run_id: str
    turn_id: str
    tool_call_id: str
    message: dict[str, JSON] = field(default_factory=dict)


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
