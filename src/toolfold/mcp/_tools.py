"""Which toolfold tools an MCP server offers, and how each is described to the model."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from toolfold._units import format_bytes
from toolfold.harness import Tool
from toolfold.tools import builtin_tools

from ._errors import ToolSpecError

if TYPE_CHECKING:
    from toolfold.execenv import Sandbox

WINDOW_ENDS = {"tail": "end", "head": "start", "head_tail": "start and end"}
"""What a window keeps, by retention mode, in the sentence a tool description gains."""

READ_TOOL = "read"
"""The built-in tool a truncated result points the model at for the rest."""


def window_note(tool: Tool[Any], *, reader: str | None) -> str:
    """The sentence every tool description gains: what the window is and where the
    rest goes, so the model knows a cut result is not the whole story."""
    policy = tool.output
    end = WINDOW_ENDS[policy.retain]
    note = (
        f"Output is cut to a window of its {end} (at most {policy.max_lines:,} lines / "
        f"{format_bytes(policy.max_bytes)}); the footer of a cut result says what was left out"
    )
    if reader is not None and tool.name != reader:
        return (
            note
            + f", and a command's full output is saved to a spill file you can page with `{reader}`."
        )
    return note + "."


SIZE_HINT_KEY = "anthropic/maxResultSizeChars"
"""The ``_meta`` key Claude Code reads on a tool (in ``tools/list``) as the largest
result it shows inline; past its default (50,000 characters) it saves the result to
a file and shows the model a reference instead."""

SIZE_HINT_SLACK = 8192
"""Characters allowed on top of the window for the footer and the ``read`` hint (two
lines naming the spill file's path)."""

SIZE_HINT_MAX = 500_000
"""The largest value Claude Code honours."""


def size_hint(tool: Tool[Any]) -> int:
    """The most characters a result of ``tool`` can hold: its window (a character is
    at least a byte) plus the footer and hint. Declared so that a client never cuts or
    spills again a result toolfold already bounded."""
    return min(SIZE_HINT_MAX, tool.output.max_bytes + SIZE_HINT_SLACK)


CONFINED_TOOLS = frozenset({"bash", "read", "grep", "pytest"})
"""The built-in tools a sandbox confines (their commands, or the files they open)."""


def describe(tool: Tool[Any], *, reader: str | None, sandbox: Sandbox | None = None) -> str:
    """The MCP description of ``tool``: its own description plus :func:`window_note`,
    and for a built-in tool of a confined server, what its sandbox allows."""
    own = tool.description.strip()
    sep = " " if own.endswith(".") else ". " if own else ""
    text = f"{own}{sep}{window_note(tool, reader=reader)}"
    if sandbox is not None and tool.name.removeprefix("toolfold_") in CONFINED_TOOLS:
        text += (
            f" This server runs in the {sandbox.profile} sandbox: {sandbox.describe()}; "
            "a refused write or connection fails with the usual OS error."
        )
    return text


def input_schema(tool: Tool[Any]) -> dict[str, Any]:
    """The JSON schema of the tool's pydantic params (an object schema, as MCP requires)."""
    schema = tool.json_schema()
    if schema.get("type") != "object":
        # MCP requires an object at the root; a params model always produces one,
        # but a hand-written schema override might not.
        schema = {"type": "object", "properties": {}, **schema}
    return schema


OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "outcome": {
            "type": "string",
            "enum": [
                "ok",
                "error",
                "invalid_arguments",
                "unknown_tool",
                "cancelled",
                "interrupted",
            ],
        },
        "details": {"type": "object"},
        # anyOf, not "type": [..., "null"]: validators and model APIs that take a
        # subset of JSON Schema (strict modes) accept it.
        "truncation": {"anyOf": [{"type": "object"}, {"type": "null"}]},
        "spill_path": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "call_id": {"type": "string"},
        "session": {"type": "string"},
    },
    "required": ["outcome", "details", "truncation", "spill_path", "call_id", "session"],
}
"""The shape of every result's ``structuredContent`` (fixed for every toolfold tool)."""


def load_tools(specs: Sequence[str]) -> list[Tool[Any]]:
    """The tools named by ``--tools module:attr`` values, in order.

    ``attr`` may be one ``Tool``, or an iterable of them (a list, or a function
    returning one, such as ``toolfold.tools:builtin_tools``).
    """
    found: list[Tool[Any]] = []
    for spec in specs:
        found.extend(_load_one(spec))
    return found


def _load_one(spec: str) -> list[Tool[Any]]:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ToolSpecError(
            f"--tools {spec!r} is not MODULE:ATTR; name a module and the Tool (or list of "
            "Tools) in it, e.g. mypkg.tools:DEPLOY"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ToolSpecError(
            f"--tools {spec!r}: cannot import {module_name!r} ({exc}); check the module name "
            "and that it is importable from this Python"
        ) from exc
    value: Any = module
    for part in attr.split("."):
        if not hasattr(value, part):
            raise ToolSpecError(f"--tools {spec!r}: {module_name!r} has no attribute {attr!r}")
        value = getattr(value, part)
    if callable(value) and not isinstance(value, Tool):
        value = value()
    items: Iterable[Any] = [value] if isinstance(value, Tool) else value
    try:
        tools = list(items)
    except TypeError:
        tools = [value]
    bad = [t for t in tools if not isinstance(t, Tool)]
    if bad or not tools:
        what = type(bad[0]).__name__ if bad else "an empty collection"
        raise ToolSpecError(
            f"--tools {spec!r} names {what}, not a toolfold Tool; make it a Tool (the @tool "
            "decorator), a list of Tools, or a function returning them"
        )
    return tools


def server_tools(extra: Sequence[Tool[Any]], *, builtin: bool) -> list[Tool[Any]]:
    """The built-in tools (unless ``builtin`` is false) followed by ``extra``; a name
    offered twice is an error naming both, since the model could not tell them apart."""
    tools = [*(builtin_tools() if builtin else []), *extra]
    seen: set[str] = set()
    for t in tools:
        if t.name in seen:
            raise ToolSpecError(
                f"two tools are named {t.name!r}; rename yours, or pass --no-builtin to "
                "leave out the built-in one"
            )
        seen.add(t.name)
    if not tools:
        raise ToolSpecError(
            "no tools to serve: --no-builtin needs at least one --tools MODULE:ATTR"
        )
    return tools


__all__ = [
    "OUTPUT_SCHEMA",
    "READ_TOOL",
    "SIZE_HINT_KEY",
    "describe",
    "input_schema",
    "load_tools",
    "server_tools",
    "size_hint",
    "window_note",
]
