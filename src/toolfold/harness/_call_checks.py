"""What is checked before a call runs: its id and name, its arguments, the tools it adds.

Each check returns the model-visible error text (or ``None``): one bad call settles as an
error result and never aborts the calls next to it.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Iterable
from typing import TYPE_CHECKING, Any, cast

from toolfold.chord import JSONValueError, check_json, describe
from toolfold.output import ToolOutput

from ._hooks import ToolCall
from ._result import ToolResult

if TYPE_CHECKING:
    from pydantic import ValidationError


def format_validation_error(tool_name: str, exc: ValidationError) -> str:
    """The model-visible text for arguments that do not fit a tool's params."""
    lines = [f"Invalid arguments for tool {tool_name!r}; the tool was not run:"]
    for err in exc.errors(include_url=False):
        loc = ".".join(str(part) for part in err["loc"]) or "(arguments)"
        lines.append(f"- {loc}: {err['msg']}")
    return "\n".join(lines)


def validation_error(exc: Exception) -> ValidationError | None:
    """``exc`` when it is pydantic's ``ValidationError``, else ``None``. Looked up in
    ``sys.modules`` rather than imported: a params class that raised one has imported
    pydantic already, and one that did not (the plain ``bash`` params) must not pay for
    it."""
    core = sys.modules.get("pydantic_core")
    error_type = getattr(core, "ValidationError", None)
    if error_type is not None and isinstance(exc, error_type):
        return cast("ValidationError", exc)
    return None


def unknown_added_tools(added: Iterable[str] | None, known: Collection[str]) -> str | None:
    """The error text for ``add_tools`` names that are not tools of the loop, or ``None``."""
    missing = [name for name in added or () if name not in known]
    if not missing:
        return None
    listed = ", ".join(sorted(known)) or "(none)"
    return (
        f"add_tools named unknown tool(s) {', '.join(map(repr, missing))}; "
        f"available tools: {listed}. No tool was added."
    )


def args_problem(tool_name: str, args: Any) -> str | None:
    """The model-visible text when ``args`` holds a value no store or replica can hold (an
    integer beyond ±(2**53 - 1), NaN, a lone surrogate, ...), or ``None`` when they are fine.

    Such arguments are refused before anything records them: the call settles as
    ``invalid_arguments`` and the other calls of the batch run as usual.
    """
    try:
        check_json(args, ["args"])
    except JSONValueError as exc:
        return f"Invalid arguments for tool {tool_name!r}; the tool was not run:\n- {exc}"
    return None


def _valid_unicode(text: str) -> bool:
    try:
        check_json(text)
    except JSONValueError:
        return False
    return True


def call_problem(call: ToolCall, earlier_ids: set[str]) -> str | None:
    """Why a call cannot even be recorded (its id or name), or ``None``.

    The store and every replica key a call by its id, so an id must be a non-empty str of
    valid Unicode without NUL (the store's keys), unique within its run.
    """
    cid, name = call.id, call.name
    if type(cid) is not str or not cid:
        return f"tool call id {describe(cid)} is not a non-empty str; the call was not run"
    if "\x00" in cid:
        return (
            f"tool call id {cid!r} contains a NUL character at index {cid.index(chr(0))}, which "
            "no store can key; the call was not run"
        )
    if not _valid_unicode(cid):
        return (
            f"tool call id {cid!r} holds a lone surrogate (not valid Unicode); the call was not run"
        )
    if cid in earlier_ids:
        return (
            f"tool call id {cid!r} is used by an earlier call of this run; ids must be unique "
            "within a run, so the call was not run"
        )
    if type(name) is not str or not _valid_unicode(name):
        return f"tool name {describe(name)} is not a str of valid Unicode; the call was not run"
    return None


def refused_result(call: ToolCall, notice: str) -> ToolResult:
    """The error result of a call that cannot be recorded: nothing runs, nothing is stored
    and no event is published (every subscriber keys calls by the id it cannot hold)."""
    sink = ToolOutput()
    state = sink.settle(notice)
    name = call.name if type(call.name) is str and _valid_unicode(call.name) else "?"
    return ToolResult.from_state(state, tool_call_id=call.id, tool_name=name, outcome="error")
