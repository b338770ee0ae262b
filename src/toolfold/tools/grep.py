"""The ``grep`` tool: a regular-expression search over files, in pure Python (head-retained).

The search is a file operation (``toolfold.execenv.run_file_op`` here, the exec host's
for a remote environment): a worker thread reads each file in fixed-size chunks and
a line longer than 256 KiB in overlapping segments, so memory stays bounded whatever
the files, and the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
import re

from pydantic import BaseModel, Field

from toolfold.execenv import SEARCH_MAX_LINE_CHARS, SEARCH_SKIP_DIRS
from toolfold.harness import Tool, ToolContext, ToolError
from toolfold.output import OutputPolicy, ToolOutput

from ._remote import call_op, remote_env, window_update

GREP_OUTPUT = OutputPolicy(retain="head")
"""Matches are meaningful from the first one: keep the head."""

SKIP_DIRS = SEARCH_SKIP_DIRS
"""Directories never searched (version control, dependencies, caches)."""

MAX_LINE_CHARS = SEARCH_MAX_LINE_CHARS
"""A matching line longer than this is shown cut (minified files would drown the output)."""


class GrepParams(BaseModel):
    """Arguments of the ``grep`` tool."""

    pattern: str = Field(description="Python regular expression (or a literal with literal=true).")
    path: str = Field(default=".", description="File or directory to search.")
    glob: str | None = Field(
        default=None, description="Only files whose name matches, e.g. '*.py'."
    )
    ignore_case: bool = Field(default=False, description="Case-insensitive match.")
    literal: bool = Field(default=False, description="Treat the pattern as plain text.")


async def run_grep(
    tool_call_id: str,
    params: GrepParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Search files for a regular expression; prints path:line:text for each matching
    line, skipping binary files and .git / node_modules / caches. Long results are cut
    at the start-based limit; the footer gives the total number of matches."""
    try:
        re.compile(  # checked here, so the error reads the same locally and remotely
            re.escape(params.pattern) if params.literal else params.pattern,
            re.IGNORECASE if params.ignore_case else 0,
        )
    except re.error as exc:
        raise ToolError(f"Invalid regular expression {params.pattern!r}: {exc}") from exc
    found = await call_op(
        remote_env(context),
        "grep",
        {
            "pattern": params.pattern,
            "literal": params.literal,
            "ignore_case": params.ignore_case,
            "path": params.path,
            "cwd": str(context.cwd),
            "glob": params.glob,
            "max_bytes": out.policy.max_bytes,
            "max_lines": out.policy.max_lines,
        },
        cancel,
        context,
    )
    if found["missing"]:
        raise ToolError(f"Path not found: {found['path']}")
    if found["total_bytes"]:
        out.feed(window_update(found))
    if cancel.is_set():
        return
    _finish(out, params, int(found["matches"]), int(found["files"]), int(found["searched"]))


def _finish(out: ToolOutput, params: GrepParams, matches: int, files: int, searched: int) -> None:
    out.details.update({"matches": matches, "files": files, "searched": searched})
    if matches == 0:
        out.write(f"No matches for {params.pattern!r} in {searched} files.")
    elif out.truncation["truncated"]:
        out.footer(
            f"[{matches} matches in {files} files; output cut at "
            f"{out.policy.max_bytes} bytes / {out.policy.max_lines} lines. Narrow the path or "
            "pattern to see the rest.]"
        )


GREP = Tool(
    name="grep",
    description=(run_grep.__doc__ or "").replace("\n    ", " ").strip(),
    params=GrepParams,
    execute=run_grep,
    output=GREP_OUTPUT,
    replay_safe=True,
)
"""The ``grep`` tool definition (replay-safe: searching has no side effects)."""
