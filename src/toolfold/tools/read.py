"""The ``read`` tool: a text file by lines (head-retained), or an image file as an image block.

The file work is a file operation (``toolfold.execenv.run_file_op`` here, the exec
host's for a remote environment): it reads in fixed-size chunks in a worker thread,
so memory stays at the window plus a fixed buffer whatever the file, and the event
loop never waits on the disk. Devices, pipes and sockets are refused.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

from toolfold._units import format_bytes
from toolfold.harness import Tool, ToolContext, ToolError
from toolfold.output import OutputPolicy, ToolOutput, image_block

from ._remote import call_op, remote_env, window_update

READ_OUTPUT = OutputPolicy(retain="head")
"""A file is meaningful from its start: keep the head (50 KiB / 2,000 lines)."""

IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


class ReadParams(BaseModel):
    """Arguments of the ``read`` tool."""

    path: str = Field(description="File to read (relative to the working directory).")
    offset: int | None = Field(default=None, ge=1, description="First line to show (1-based).")
    limit: int | None = Field(default=None, ge=1, description="Most lines to show.")
    line_byte: int | None = Field(
        default=None,
        ge=0,
        description=(
            "Start this many bytes into line `offset` (to read on inside a line longer "
            "than the output window; the footer gives the value)."
        ),
    )


async def run_read(
    tool_call_id: str,
    params: ReadParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Read a file. Text files are shown from the start (or from `offset`, for at most
    `limit` lines); long files and long lines are cut and the footer says which offset
    (and line_byte) continues. PNG, JPEG, GIF and WebP files are returned as images."""
    env = remote_env(context)
    where = {"path": params.path, "cwd": str(context.cwd)}
    info = await call_op(env, "stat", where, cancel, context)
    path = str(info["path"])
    if not info["exists"]:
        raise ToolError(f"File not found: {path}")
    if info["is_dir"]:
        raise ToolError(f"{path} is a directory; list it with bash (ls) instead")
    out.details["path"] = path
    mime = IMAGE_TYPES.get(PurePosixPath(path).suffix.lower())
    if mime is not None:
        limit = out.policy.max_image_bytes
        got = await call_op(env, "read_bytes", {**where, "max_bytes": limit}, cancel, context)
        if got["too_big"]:
            raise ToolError(
                f"{path} is {got['size']} bytes, over the {limit}-byte image limit; "
                "downscale it first (e.g. with bash)"
            )
        out.image(image_block(base64.b64decode(got["data"]), mime))
        out.write(f"Read image file {PurePosixPath(path).name} [{mime}, {got['size']} bytes]")
        out.details["mime_type"] = mime
        return
    start = params.offset or 1
    window = await call_op(
        env,
        "read_lines",
        {
            **where,
            "start": start,
            "line_byte": params.line_byte or 0,
            "limit": params.limit,
            "max_bytes": out.policy.max_bytes,
            "max_lines": out.policy.max_lines,
        },
        cancel,
        context,
    )
    out.feed(window_update(window))
    _finish(out, path, start, window, cancel)


def _finish(
    out: ToolOutput, path: str, start: int, window: Mapping[str, Any], cancel: asyncio.Event
) -> None:
    """Details and the continuation footer, from the file operation's answer."""
    if cancel.is_set():
        return
    shown = int(window["shown"])
    if shown == 0 and start > 1:
        raise ToolError(f"offset {start} is past the end of {path}")
    out.details["lines"] = shown
    resume_line, resume_byte = window["resume_line"], window["resume_byte"]
    if resume_line is None:
        return
    go_on = f"offset={resume_line}" + (f", line_byte={resume_byte}" if resume_byte else "")
    text = out.text
    sep = "\n" if text and not text.endswith("\n") else ""
    t = out.truncation
    last = start + max(t["output_lines"], 1) - 1
    if t["truncated"]:
        least = "" if window["counted_all"] else "at least "
        cut = f" Line {resume_line:,} is cut after byte {resume_byte:,}." if resume_byte else ""
        out.footer(
            f"{sep}[Showing lines {start:,}-{last:,} of {least}{start - 1 + t['total_lines']:,} "
            f"({format_bytes(t['output_bytes'])} of {least}{format_bytes(t['total_bytes'])}).{cut} "
            f"Use {go_on} to continue.]"
        )
    else:
        out.footer(
            f"{sep}[Showing lines {start:,}-{start + shown - 1:,}. More lines follow; "
            f"use {go_on} to continue.]"
        )


READ = Tool(
    name="read",
    description=(run_read.__doc__ or "").replace("\n    ", " ").strip(),
    params=ReadParams,
    execute=run_read,
    output=READ_OUTPUT,
    replay_safe=True,
)
"""The ``read`` tool definition (replay-safe: reading has no side effects)."""
