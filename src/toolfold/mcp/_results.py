"""A settled toolfold result as the MCP client receives it."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from toolfold.harness import ToolResult

from ._tools import SIZE_HINT_KEY


def read_hint(state: Any, *, retain: str, reader: str | None) -> str:
    """One line telling the model how to page through what the window left out with
    ``read``, or ``""`` when nothing was cut or the full output was not kept.

    The tool's own footer already names the spill file; this adds the call to make,
    with the offset where the missing part starts (tail window: line 1; head window:
    the first line not shown; head_tail window: the first cut line, as its marker says)."""
    if reader is None or not isinstance(state, dict):
        return ""
    truncation = state.get("truncation")
    spill = state.get("spill_path")
    if not isinstance(truncation, dict) or not truncation.get("truncated") or not spill:
        return ""
    cut_line = truncation.get("cut_line")
    if retain == "head_tail" and isinstance(cut_line, int) and cut_line >= 1:
        offset = cut_line
    elif retain == "head" or truncation.get("first_line_exceeds_limit"):
        shown = int(truncation.get("output_lines", 0))
        offset = max(1, shown if truncation.get("last_line_partial") else shown + 1)
    else:
        offset = 1
    return (
        f"[To see the rest, call {reader} with path={json.dumps(str(spill))} and "
        f"offset={offset}; each read's footer names the offset to continue from.]"
    )


def call_tool_result(
    result: ToolResult,
    *,
    retain: str,
    call_id: str,
    session: str,
    reader: str | None,
    size_hint: int | None = None,
) -> types.CallToolResult:
    """The bounded text (with its footer, then the hint naming the ``reader`` tool, if
    one is offered), then the image
    blocks; ``isError`` for every outcome but ok; ``structuredContent`` with the
    details and the truncation record; with ``size_hint``, the ``_meta`` size hint
    (``anthropic/maxResultSizeChars``) a client reads per result."""
    state: dict[str, Any] = dict(result.state) if result.state is not None else {}
    text = result.text
    hint = read_hint(state, retain=retain, reader=reader)
    if hint:
        text = text + ("" if text.endswith("\n") or not text else "\n") + hint
    blocks: list[types.ContentBlock] = [types.TextContent(type="text", text=text)]
    for block in result.content[1:]:
        if block.get("type") == "image":
            blocks.append(
                types.ImageContent(
                    type="image", data=str(block["data"]), mime_type=str(block["mime_type"])
                )
            )
    spill = state.get("spill_path")
    structured = {
        "outcome": result.outcome,
        "details": result.details,
        "truncation": state.get("truncation"),
        "spill_path": spill if isinstance(spill, str) else None,
        "call_id": call_id,
        "session": session,
    }
    return types.CallToolResult(
        content=blocks,
        structured_content=structured,
        is_error=result.is_error,
        _meta=None if size_hint is None else {SIZE_HINT_KEY: size_hint},
    )


__all__ = ["call_tool_result", "read_hint"]
