"""``ToolResult`` (what the model sees) and ``ToolResultMessage`` (what the transcript keeps)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from toolfold import _json
from toolfold._record import field, record
from toolfold.output import output_text

from ._errors import ToolError

if TYPE_CHECKING:
    from toolfold.output import ToolOutputState, Usage

Outcome = Literal["ok", "error", "invalid_arguments", "unknown_tool", "cancelled", "interrupted"]
"""How a call ended. Everything but ``"ok"`` has ``is_error=True``."""

CANCELLED_MARKER = "[Tool call cancelled; the output above is partial.]"
"""Appended to the output of a call stopped through its ``cancel`` event."""

INTERRUPTION_MARKER = "[Tool call interrupted before it finished; the output above is partial.]"
"""Appended to the output of a call the harness stopped (task cancelled, crash recovery
of a tool that is not replay-safe)."""


MAX_NOTICE_CHARS = 4000
"""Error texts appended to a result are cut to this many characters (a traceback-sized
message must not crowd out the output it explains)."""


def error_text(exc: BaseException) -> str:
    """The notice a call that failed with ``exc`` settles with: a ``ToolError``'s message
    as written for the model, anything else prefixed with its type; cut to
    ``MAX_NOTICE_CHARS``."""
    text = str(exc) if isinstance(exc, ToolError) else f"{type(exc).__name__}: {exc}"
    if len(text) > MAX_NOTICE_CHARS:
        text = text[: MAX_NOTICE_CHARS - 20] + " [error text cut]"
    return text


WHAT_MAX_CHARS = 200
"""The longest ``what`` a settled transcript entry keeps of its call's arguments."""


def describe_call(args: Any) -> str:
    """A short description of a call's arguments, kept with its settled entry (``what``)
    so a listing of a session says what each call did: the ``command`` of a shell-like
    tool, else the arguments as compact JSON, cut to ``WHAT_MAX_CHARS``."""
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        text = args["command"]
        if isinstance(args.get("handle"), str) and isinstance(args.get("started_by"), str):
            # A background command's output call: which command of which call.
            text = f"{args['handle']} of {args['started_by']}: {text}"
    else:
        try:
            text = _json.dumps_sorted(args).decode()
        except TypeError:
            text = repr(args)
    text = " ".join(text.split())
    return text if len(text) <= WHAT_MAX_CHARS else text[: WHAT_MAX_CHARS - 1] + "…"


@record(frozen=True)
class ToolResult:
    """The settled, model-visible result of one call, assembled from the sink's final
    state ("the fold is the result"): content, details, usage, ``is_error``,
    ``terminate``, added tools."""

    tool_call_id: str
    tool_name: str
    content: list[dict[str, Any]]
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None
    added_tools: list[str] | None = None
    terminate: bool = False
    is_error: bool = False
    outcome: Outcome = "ok"
    state: ToolOutputState | None = None
    """The full final ``ToolOutputState`` (including ``truncation``), for hosts and tests."""
    kind: str | None = None
    """``None``: a call the model made. ``"background"``: the output of a command that
    outlived the call that started it (``ToolContext.follow_background``), which no
    model asked for and a transcript sent to a model leaves out."""

    @classmethod
    def from_state(
        cls,
        state: ToolOutputState,
        *,
        tool_call_id: str,
        tool_name: str,
        outcome: Outcome,
        kind: str | None = None,
    ) -> ToolResult:
        """Assemble the result from a final (or recovered) output state."""
        return cls(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            content=[dict(block) for block in state["content"]],
            details=state["details"],
            usage=state.get("usage"),
            added_tools=state.get("added_tools"),
            terminate=bool(state.get("terminate", False)),
            is_error=outcome != "ok",
            outcome=outcome,
            state=state,
            kind=kind,
        )

    @property
    def text(self) -> str:
        """The text (the text blocks joined: head, cut marker and tail under head_tail)."""
        return output_text({"content": self.content})

    def to_message(self) -> ToolResultMessage:
        """The transcript entry for this result."""
        return ToolResultMessage(
            tool_call_id=self.tool_call_id,
            tool_name=self.tool_name,
            content=self.content,
            details=self.details,
            usage=self.usage,
            added_tools=self.added_tools,
            terminate=self.terminate,
            is_error=self.is_error,
            outcome=self.outcome,
            kind=self.kind,
        )


@record(frozen=True)
class ToolResultMessage:
    """The settled transcript entry for a tool call (``role: "tool_result"``)."""

    tool_call_id: str
    tool_name: str
    content: list[dict[str, Any]]
    details: dict[str, Any]
    is_error: bool
    usage: Usage | None = None
    added_tools: list[str] | None = None
    terminate: bool = False
    outcome: Outcome = "ok"
    kind: str | None = None
    """See ``ToolResult.kind``."""

    def to_json(self) -> dict[str, Any]:
        """A JSON object (optional fields omitted when unset)."""
        data: dict[str, Any] = {
            "role": "tool_result",
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "content": self.content,
            "details": self.details,
            "is_error": self.is_error,
            "outcome": self.outcome,
        }
        if self.usage is not None:
            data["usage"] = self.usage
        if self.added_tools is not None:
            data["added_tools"] = self.added_tools
        if self.terminate:
            data["terminate"] = True
        if self.kind is not None:
            data["kind"] = self.kind
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ToolResultMessage:
        """Parse what ``to_json`` produced."""
        return cls(
            tool_call_id=data["tool_call_id"],
            tool_name=data["tool_name"],
            content=data["content"],
            details=data.get("details", {}),
            is_error=bool(data["is_error"]),
            usage=data.get("usage"),
            added_tools=data.get("added_tools"),
            terminate=bool(data.get("terminate", False)),
            outcome=data.get("outcome", "error" if data["is_error"] else "ok"),
            kind=data.get("kind"),
        )
