"""An agent run as the session keeps it: its record (what to ask which model), and the
Chat Completions conversation rebuilt from the settled transcript, so a run a crash
cut short continues from what was recovered."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolfold import _json
from toolfold.harness import ToolCall
from toolfold.storage import SESSION, ValueAddress, value

AGENT_RUN_NAMESPACE = "agent.run"


def agent_run_address() -> ValueAddress[Any]:
    """Where a session keeps its agent run's record (never the API key)."""
    return value(AGENT_RUN_NAMESPACE, "run", SESSION)


def agent_run_record(
    task: str,
    *,
    model: str,
    base_url: str | None,
    system: str | None,
    max_turns: int,
    run_id: str,
) -> dict[str, Any]:
    """The record ``toolfold agent`` writes before the first turn; ``done`` is set
    once the run ended (a resumed run continues only while it is unset)."""
    return {
        "task": task,
        "model": model,
        "base_url": base_url,
        "system": system,
        "max_turns": max_turns,
        "run_id": run_id,
        "done": None,
    }


@dataclass
class History:
    """The conversation so far: ``messages`` to send, ``turns`` the model already
    took, and the tool calls its last message asked for that never settled
    (the crash came before they were recorded): the run runs them first."""

    messages: list[dict[str, Any]]
    turns: int = 0
    unanswered: list[ToolCall] = field(default_factory=list)
    turn_id: str = ""
    answered: bool = False
    """The last message was a whole answer without tool calls: the run had ended
    (a crash came before that was recorded), there is nothing to continue."""


def first_messages(task: str, system: str | None) -> list[dict[str, Any]]:
    """The system prompt (when given) and the task."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": task})
    return messages


def _text(parts: Any, kind: str = "text") -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        str(p.get(kind, "")) for p in parts if isinstance(p, dict) and p.get("type") == kind
    )


def message_calls(entry: dict[str, Any]) -> list[ToolCall]:
    """The tool calls of a settled assistant message. An interrupted message asked for
    none: its argument text may be cut, and running a cut call is not what the
    model asked for."""
    if entry.get("stop_reason") == "interrupted" or entry.get("is_error"):
        return []
    calls = []
    for part in entry.get("content") or []:
        if isinstance(part, dict) and part.get("type") == "tool_call":
            text = str(part.get("arguments") or "{}")
            try:
                args: Any = _json.loads(text)
            except _json.DecodeError:
                args = text
            calls.append(ToolCall(str(part.get("id")), str(part.get("name")), args))
    return calls


def assistant_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    """The Chat Completions form of an assistant message (arguments as generated)."""
    entry: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        entry["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.args
                    if isinstance(c.args, str)
                    else _json.dumps(c.args).decode(),
                },
            }
            for c in calls
        ]
    return entry


def rebuild_history(
    entries: list[dict[str, Any]], *, task: str, system: str | None, run_id: str
) -> History:
    """The conversation of run ``run_id`` from the session's settled transcript entries
    (assistant messages and tool results, in order)."""
    history = History(first_messages(task, system))
    results: dict[str, str] = {}
    for entry in entries:
        if entry.get("kind") is not None:
            continue  # a background command's output: no model asked for that call
        if entry.get("role") != "assistant" and isinstance(entry.get("tool_call_id"), str):
            results[entry["tool_call_id"]] = _text(entry.get("content"))
    asked: list[ToolCall] = []
    for entry in entries:
        if entry.get("role") != "assistant" or entry.get("run_id") != run_id:
            continue
        _answer(history, asked, results)
        history.turns += 1
        history.turn_id = str(entry.get("turn_id") or f"turn-{history.turns}")
        asked = message_calls(entry)
        history.messages.append(assistant_message(_text(entry.get("content")), asked))
        history.answered = not asked and not (
            entry.get("stop_reason") == "interrupted" or entry.get("is_error")
        )
    history.unanswered = [c for c in asked if c.id not in results]
    _answer(history, [c for c in asked if c.id in results], results)
    return history


def _answer(history: History, asked: list[ToolCall], results: dict[str, str]) -> None:
    for call in asked:
        # A call with no settled result before a later message cannot happen in a
        # run of this loop (each turn's calls settle before the next turn starts).
        text = results.get(call.id, "(no result was recorded for this call)")
        history.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
