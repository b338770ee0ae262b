"""The events of a run of tool calls (``RunStart``, ``ToolStart``, ``ToolUpdate``,
``ToolEnd``, ``ToolSettled``, ``RunEnd``); imported from ``events``, with the rest."""

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


__all__ = ["JSON", "RunEnd", "RunStart", "ToolEnd", "ToolSettled", "ToolStart", "ToolUpdate"]
