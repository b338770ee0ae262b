"""The ``grep`` tool: a regular-expression search over files, in pure Python (head-retained)."""

from __future__ import annotations

import asyncio
import os
import re

from pydantic import BaseModel, Field

from toolfold.execenv import (
    SEARCH_MAX_LINE_CHARS,
    SEARCH_SKIP_DIRS,
    RemoteExecEnv,
    iter_files,
    search_file,
)
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
        regex = re.compile(
            re.escape(params.pattern) if params.literal else params.pattern,
            re.IGNORECASE if params.ignore_case else 0,
        )
    except re.error as exc:
        raise ToolError(f"Invalid regular expression {params.pattern!r}: {exc}") from exc
    remote = remote_env(context)
    if remote is not None:
        await _grep_remote(remote, params, cancel, out, context)
        return
    root = context.resolve(params.path)
    if not root.exists():
        raise ToolError(f"Path not found: {root}")
    base = root if root.is_dir() else root.parent
    matches = files = searched = 0
    for i, path in enumerate(iter_files(root, params.glob)):
        if i % 64 == 63:
            out.details.update({"matches": matches, "files": files, "searched": searched})
            await asyncio.sleep(0)  # let updates publish and cancellation land
            if cancel.is_set():
                return
        searched += 1
        # Big files are searched off the event loop, so other tools keep streaming.
        try:
            big = path.stat().st_size > 1 << 20
        except OSError:
            continue
        hits = (
            await asyncio.to_thread(search_file, path, regex) if big else search_file(path, regex)
        )
        if not hits:
            continue
        files += 1
        matches += len(hits)
        shown = os.path.relpath(path, base) if root.is_dir() else path.name
        out.write("".join(f"{shown}:{n}:{line}\n" for n, line in hits))
    _finish(out, params, matches, files, searched)


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


async def _grep_remote(
    env: RemoteExecEnv,
    params: GrepParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """The same search on the exec host's file system; it sends one bounded window."""
    found = await call_op(
        env,
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
    )
    if found["missing"]:
        raise ToolError(f"Path not found: {found['path']}")
    if found["total_bytes"]:
        out.feed(window_update(found))
    if cancel.is_set():
        return
    _finish(out, params, int(found["matches"]), int(found["files"]), int(found["searched"]))


GREP = Tool(
    name="grep",
    description=(run_grep.__doc__ or "").replace("\n    ", " ").strip(),
    params=GrepParams,
    execute=run_grep,
    output=GREP_OUTPUT,
    replay_safe=True,
)
"""The ``grep`` tool definition (replay-safe: searching has no side effects)."""
