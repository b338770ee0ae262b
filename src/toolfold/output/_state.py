"""The shape of one tool call's output: ``ToolOutputState`` and its parts."""

from __future__ import annotations

import enum
from typing import Any, Literal, NotRequired, TypedDict


class TextContent(TypedDict):
    """A text block. ``content[0]`` is the text; under ``retain="head_tail"`` the text
    is ``content[0]`` (head) + ``content[1]`` (the cut marker) + ``content[2]`` (tail):
    read it with ``output_text(state)``."""

    type: Literal["text"]
    text: str


class ImageContent(TypedDict):
    """An image block: base64 ``data`` and its ``mime_type``. Never windowed."""

    type: Literal["image"]
    data: str
    mime_type: str


class Usage(TypedDict, total=False):
    """Model usage a tool incurred (e.g. a subagent). ``ToolOutput.usage`` accumulates it."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float


USAGE_KEYS: frozenset[str] = frozenset(Usage.__annotations__)


class Truncation(TypedDict):
    """Totals over everything ever written, and the retained view's size.

    The field names are the execution environment's ``ShellOutputTruncation``;
    ``last_line_bytes`` comes from its ``ShellOutputMetadata`` (0 when the output
    ends with a newline). It is kept so a seeded sink resumes counting exactly.
    """

    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool
    first_line_exceeds_limit: bool
    max_lines: int
    max_bytes: int
    last_line_bytes: int
    cut_line: NotRequired[int]
    """``retain="head_tail"`` only: the first line (1-based) not wholly shown before the
    cut in the middle (0 while nothing is cut)."""
    cut_lines: NotRequired[int]
    """``retain="head_tail"`` only: lines not wholly shown between the two parts."""
    cut_bytes: NotRequired[int]
    """``retain="head_tail"`` only: bytes of the output not shown between the parts."""


class ToolOutputState(TypedDict):
    """Everything a tool call produced; the target of every ``ToolUpdate`` op.

    ``content`` is one text block (three under ``retain="head_tail"``: head, cut marker,
    tail; ``output_text`` joins them) followed by zero or more image blocks.
    ``spill_path`` appears once an execution environment reports a spill file.
    """

    content: list[TextContent | ImageContent]
    details: dict[str, Any]
    usage: NotRequired[Usage]
    added_tools: NotRequired[list[str]]
    terminate: bool
    truncation: Truncation
    spill_path: NotRequired[str]


def text_blocks(state: Any) -> int:
    """How many text blocks lead ``state["content"]`` (1, or 3 for a head_tail text)."""
    content = state.get("content") if isinstance(state, dict) else None
    if not isinstance(content, list):
        return 0
    n = 0
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text":
            break
        n += 1
    return n


def output_text(state: Any) -> str:
    """The text of a ``ToolOutputState`` (or anything shaped like one): its leading text
    blocks joined. ``""`` for anything else."""
    content = state.get("content") if isinstance(state, dict) else None
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text":
            break
        text = block.get("text")
        if isinstance(text, str):
            parts.append(text)
    return "".join(parts)


class SinkState(enum.Enum):
    """Lifecycle of a ``ToolOutput``: writable while ``OPEN``, frozen once ``SETTLED``."""

    OPEN = "open"
    SETTLED = "settled"
