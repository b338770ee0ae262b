"""The ``grep`` tool: a regular-expression search over files, in pure Python (head-retained)."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from toolfold.harness import Tool, ToolContext, ToolError
from toolfold.output import OutputPolicy, ToolOutput

GREP_OUTPUT = OutputPolicy(retain="head")
"""Matches are meaningful from the first one: keep the head."""

SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"}
)
"""Directories never searched (version control, dependencies, caches)."""

MAX_LINE_CHARS = 500
"""A matching line longer than this is shown cut (minified files would drown the output)."""

_SNIFF = 8192


class GrepParams(BaseModel):
    """Arguments of the ``grep`` tool."""

    pattern: str = Field(description="Python regular expression (or a literal with literal=true).")
    path: str = Field(default=".", description="File or directory to search.")
    glob: str | None = Field(
        default=None, description="Only files whose name matches, e.g. '*.py'."
    )
    ignore_case: bool = Field(default=False, description="Case-insensitive match.")
    literal: bool = Field(default=False, description="Treat the pattern as plain text.")


def _files(root: Path, glob: str | None) -> Iterator[Path]:
    if root.is_file():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            if glob is None or fnmatch.fnmatch(name, glob):
                yield Path(dirpath) / name


def _search(path: Path, regex: re.Pattern[str]) -> list[tuple[int, str]]:
    """(line number, line) for every matching line; [] for binary or unreadable files."""
    try:
        with path.open("rb") as f:
            if b"\0" in f.read(_SNIFF):
                return []
        hits: list[tuple[int, str]] = []
        with path.open("r", encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, start=1):
                if regex.search(line):
                    line = line.rstrip("\r\n")
                    if len(line) > MAX_LINE_CHARS:
                        line = line[:MAX_LINE_CHARS] + " [line cut]"
                    hits.append((lineno, line))
        return hits
    except OSError:
        return []


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
    root = context.resolve(params.path)
    if not root.exists():
        raise ToolError(f"Path not found: {root}")
    base = root if root.is_dir() else root.parent
    matches = files = searched = 0
    for i, path in enumerate(_files(root, params.glob)):
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
        hits = await asyncio.to_thread(_search, path, regex) if big else _search(path, regex)
        if not hits:
            continue
        files += 1
        matches += len(hits)
        shown = os.path.relpath(path, base) if root.is_dir() else path.name
        out.write("".join(f"{shown}:{n}:{line}\n" for n, line in hits))
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
