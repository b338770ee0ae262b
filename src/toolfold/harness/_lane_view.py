"""The lane view and its reducer: harness events folded into one plain JSON value.

``reduce_lane_snapshot`` takes the event and the view, nothing else: no tool
registry, no tool code, so a tool rewritten between a crash and a resume cannot
make a persisted stream unreadable, and a browser can run the same fold. The
lane host (``_lane.py``) runs it on a tracked view to replicate it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from toolfold.chord import ChordError, JSONValueError, apply

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

__all__ = [
    "DEFAULT_SETTLED_TOOLS",
    "DEFAULT_TRANSCRIPT_TAIL",
    "LaneMessage",
    "LaneOperation",
    "LaneTool",
    "LaneView",
    "new_lane_view",
    "reduce_lane_snapshot",
]

DEFAULT_TRANSCRIPT_TAIL = 50
"""How many settled ``ToolResultMessage``s a lane view keeps (oldest dropped first)."""

DEFAULT_SETTLED_TOOLS = 20
"""How many settled tool calls stay in ``tools``/``order`` (running calls always stay)."""


class LaneOperation(TypedDict):
    """The lane's current operation (the latest ``RunStart``)."""

    run_id: str
    status: Literal["running", "done"]


class LaneTool(TypedDict):
    """One tool call as the lane sees it: identity, status, and its folded output."""

    tool_name: str
    args: Any
    run_id: str
    turn_id: str
    status: Literal["running", "ok", "error", "cancelled", "interrupted"]
    """``running`` until ``ToolEnd`` (``ok`` / ``error``), then the settled message's
    ``outcome`` — the words ``toolfold show`` and the stored-session API use."""
    output: Any
    """The folded ``ToolOutputState`` (``None`` until the first, base, update arrives)."""


class LaneMessage(TypedDict):
    """One assistant message as the lane sees it: identity, status, its folded state."""

    run_id: str
    turn_id: str
    status: Literal["running", "ok", "error"]
    stop_reason: str | None
    output: Any
    """The folded ``AssistantMessageState`` (its ``tool_call`` parts name the calls
    in ``tools`` that it asked for)."""


class LaneView(TypedDict):
    """A lane's state: the operation, its tool calls with folded output, a transcript
    tail, and (once a lane sees one) its assistant messages in ``messages`` /
    ``message_order``."""

    lane: str
    operation: LaneOperation | None
    tools: dict[str, LaneTool]
    order: list[str]
    transcript: list[dict[str, Any]]
    messages: NotRequired[dict[str, LaneMessage]]
    message_order: NotRequired[list[str]]


def new_lane_view(lane: str) -> LaneView:
    """An empty lane view for ``lane``."""
    return {"lane": lane, "operation": None, "tools": {}, "order": [], "transcript": []}


def _plain(value: Any) -> Any:
    """Structural copy: containers are copied, leaves (strings, numbers) shared.

    Works on tracked proxies too (they read like dicts and lists), and costs the
    number of containers, not the number of bytes: strings are immutable.
    """
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence):
        return [_plain(v) for v in value]
    if hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return [_plain(v) for v in value]
    # Not JSON (args are the model's JSON in practice): keep a readable form rather
    # than refusing the whole event.
    return str(value)


def reduce_lane_snapshot(
    view: LaneView,
    event: HarnessEvent,
    *,
    transcript_tail: int = DEFAULT_TRANSCRIPT_TAIL,
    settled_tools: int = DEFAULT_SETTLED_TOOLS,
) -> None:
    """Fold one harness event into ``view`` by plain mutation.

    - ``RunStart``: the operation becomes ``{run_id, "running"}``.
    - ``ToolStart``: a running entry with ``output: None`` is added to ``tools``
      and ``order`` (a repeated start for a known id resets that entry).
    - ``ToolUpdate``: the ops are applied to the call's output. An update for a
      call the view has never seen is ignored (the host sends a base batch); an
      update whose ops cannot apply leaves the view unchanged.
    - ``ToolEnd``: status ``"ok"`` or ``"error"``; nothing else (the fold is the
      result). Settled calls past the newest ``settled_tools`` leave ``tools``
      (running calls always stay), unless the transcript refers to them.
    - ``ToolSettled``: the message joins the transcript, which keeps the last
      ``transcript_tail`` entries; the status becomes the message's ``outcome``.
      When the call's folded output already holds the message's content and
      details (the fold is the result), the entry refers to it instead of
      copying it (``"output_ref": ["tools", id, "output"]``, no ``content`` /
      ``details``), so a settled result never crosses a subscription twice.
    - ``RunEnd``: the operation (if it is this run) becomes ``"done"``.
    - ``MessageStart`` / ``MessageUpdate`` / ``MessageEnd``: an assistant message in
      ``messages`` (created with ``message_order`` on the first one), its ops
      folded like a call's output; settled messages past the newest
      ``settled_tools`` leave.

    Anything else is ignored. ``view`` may be a plain dict or a tracked proxy: the
    reducer only reads, assigns, deletes and uses list mutators, so a tracker
    sees every change.
    """
    if isinstance(event, ToolUpdate):
        _reduce_update(view, event)
    elif isinstance(event, ToolStart):
        tools = view["tools"]
        known = event.tool_call_id in tools
        if known:
            _detach_refs(view, event.tool_call_id)
        # The entry first: if its value is refused, `order` must not name a missing call.
        tools[event.tool_call_id] = {
            "tool_name": event.tool_name,
            "args": _plain(event.args),
            "run_id": event.run_id,
            "turn_id": event.turn_id,
            "status": "running",
            "output": None,
        }
        if not known:
            view["order"].append(event.tool_call_id)
    elif isinstance(event, ToolEnd):
        tool = view["tools"].get(event.tool_call_id)
        if tool is not None:
            tool["status"] = "error" if event.is_error else "ok"
            _trim_settled(view, settled_tools)
    elif isinstance(event, ToolSettled):
        _reduce_settled(view, event, transcript_tail)
        _trim_settled(view, settled_tools)
    elif isinstance(event, MessageUpdate):
        message = view.get("messages", {}).get(event.message_id)
        if message is not None:
            _reduce_output(message, event.ops)
    elif isinstance(event, MessageStart):
        if "messages" not in view:
            view["messages"] = {}
            view["message_order"] = []
        known = event.message_id in view["messages"]
        view["messages"][event.message_id] = {
            "run_id": event.run_id,
            "turn_id": event.turn_id,
            "status": "running",
            "stop_reason": None,
            "output": None,
        }
        if not known:
            view["message_order"].append(event.message_id)
    elif isinstance(event, MessageEnd):
        message = view.get("messages", {}).get(event.message_id)
        if message is not None:
            message["status"] = "error" if event.is_error else "ok"
            message["stop_reason"] = event.stop_reason
            _trim_messages(view, settled_tools)
    elif isinstance(event, RunStart):
        view["operation"] = {"run_id": event.run_id, "status": "running"}
    elif isinstance(event, RunEnd):
        operation = view["operation"]
        if operation is not None and operation["run_id"] == event.run_id:
            operation["status"] = "done"


def _trim_messages(view: LaneView, keep: int) -> None:
    order = view.get("message_order", [])
    settled = [m for m in order if view["messages"][m]["status"] != "running"]
    for message_id in settled[: max(0, len(settled) - keep)]:
        order.remove(message_id)
        del view["messages"][message_id]


def _reduce_update(view: LaneView, event: ToolUpdate) -> None:
    tool = view["tools"].get(event.tool_call_id)
    if tool is None:
        return
    _reduce_output(tool, event.ops)


def _reduce_output(tool: Any, ops: list[Any]) -> None:
    """Apply ``ops`` to ``tool["output"]`` (a call's or an assistant message's)."""
    if type(tool) is dict:
        # A plain view: apply in place. `apply` is atomic and proportional to the
        # change; it returns the new value when the batch replaces the root.
        try:
            tool["output"] = apply(tool["output"], ops)
        except ChordError:
            return
        return
    # A tracked view. Applying ops straight onto a tracked sub-tree would bypass
    # the tracker, so apply them to a structural copy (strings shared, so this
    # costs the number of containers, not bytes) and assign the result back:
    # the tracker diffs container over container and emits the small ops
    # (`a` for a grown text, `t`+`a` for a slid window, `p` for a new image).
    try:
        output = apply(_plain(tool["output"]), ops)
    except ChordError:
        return
    try:
        tool["output"] = output
    except JSONValueError:
        # A `t` from a foreign producer may split a surrogate pair (the protocol allows it),
        # but a lone surrogate is no value the view can hold (nor a store keep): every
        # subscriber sees U+FFFD in its place instead.
        tool["output"] = _valid_unicode(output)


def _valid_unicode(value: Any) -> Any:
    """``value`` with every lone surrogate in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {_valid_unicode(k): _valid_unicode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid_unicode(v) for v in value]
    return value


_OUTCOMES = frozenset({"ok", "error", "cancelled", "interrupted"})


def _reduce_settled(view: LaneView, event: ToolSettled, transcript_tail: int) -> None:
    message = event.message
    tool = view["tools"].get(event.tool_call_id)
    entry: dict[str, Any]
    output = tool["output"] if tool is not None else None
    if (
        output is not None
        and hasattr(output, "get")
        and output.get("content") == message.get("content")
        and output.get("details") == message.get("details", {})
    ):
        # The subscribers folded this content already: refer to it. A copy would
        # send a 1 MiB image to every subscriber a second time.
        entry = {k: _plain(v) for k, v in message.items() if k not in ("content", "details")}
        entry["output_ref"] = ["tools", event.tool_call_id, "output"]
    else:
        entry = _plain(message)
    transcript = view["transcript"]
    transcript.append(entry)
    excess = len(transcript) - max(transcript_tail, 0)
    if excess > 0:
        del transcript[:excess]
    if tool is not None:
        outcome = message.get("outcome")
        status: Any = (
            outcome if outcome in _OUTCOMES else ("error" if message.get("is_error") else "ok")
        )
        if tool["status"] != status:
            tool["status"] = status


def _referenced(view: LaneView) -> set[str]:
    """Calls whose output a transcript entry refers to (they must stay in ``tools``)."""
    return {
        entry["tool_call_id"]
        for entry in view["transcript"]
        if "output_ref" in entry and isinstance(entry.get("tool_call_id"), str)
    }


def _detach_refs(view: LaneView, tool_call_id: str) -> None:
    """Give transcript entries that refer to ``tool_call_id`` their own copy of its
    output before a repeated ``ToolStart`` resets it (rare: a re-run of a known id)."""
    tool = view["tools"][tool_call_id]
    for entry in view["transcript"]:
        if entry.get("tool_call_id") == tool_call_id and "output_ref" in entry:
            output = _plain(tool["output"]) or {}
            del entry["output_ref"]
            entry["content"] = output.get("content", [])
            entry["details"] = output.get("details", {})


def _trim_settled(view: LaneView, keep: int) -> None:
    tools = view["tools"]
    settled = [tid for tid in view["order"] if tools[tid]["status"] != "running"]
    excess = len(settled) - max(keep, 0)
    if excess > 0:
        referenced = _referenced(view)
        drop = [tid for tid in settled[:excess] if tid not in referenced]
        _drop_tools(view, drop)


def _drop_tools(view: LaneView, ids: list[str]) -> None:
    if not ids:
        return
    gone = set(ids)
    tools = view["tools"]
    for tid in ids:
        del tools[tid]
    order = view["order"]
    # Remove by splicing runs so the tracker records few `p` ops rather than a rewrite.
    i = len(order) - 1
    while i >= 0:
        if order[i] in gone:
            j = i
            while j - 1 >= 0 and order[j - 1] in gone:
                j -= 1
            del order[j : i + 1]
            i = j - 1
        else:
            i -= 1
