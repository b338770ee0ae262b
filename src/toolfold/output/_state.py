"""The shape of one tool call's output: ``ToolOutputState`` and its parts."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict


class TextContent(TypedDict):
    """The one text block; always ``content[0]``."""

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


class ToolOutputState(TypedDict):
    """Everything a tool call produced; the target of every ``ToolUpdate`` op.

    ``content`` is exactly one text block followed by zero or more image blocks.
    ``spill_path`` appears once an execution environment reports a spill file.
    """

    content: list[TextContent | ImageContent]
    details: dict[str, Any]
    usage: NotRequired[Usage]
    added_tools: NotRequired[list[str]]
    terminate: bool
    truncation: Truncation
    spill_path: NotRequired[str]
