"""The ``read`` tool: a text file by lines (head-retained), or an image file as an image block."""

from __future__ import annotations

import asyncio
import base64
import codecs
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from toolfold._units import format_bytes
from toolfold.execenv import RemoteExecEnv
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

_BLOCK_BYTES = 64 * 1024
_COUNT_BLOCK_BYTES = 1024 * 1024


class ReadParams(BaseModel):
    """Arguments of the ``read`` tool."""

    path: str = Field(description="File to read (relative to the working directory).")
    offset: int | None = Field(default=None, ge=1, description="First line to show (1-based).")
    limit: int | None = Field(default=None, ge=1, description="Most lines to show.")


async def run_read(
    tool_call_id: str,
    params: ReadParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Read a file. Text files are shown from the start (or from `offset`, for at most
    `limit` lines); long files are cut and the footer says which offset continues.
    PNG, JPEG, GIF and WebP files are returned as images."""
    remote = remote_env(context)
    if remote is not None:
        await _read_remote(remote, params, cancel, out, context)
        return
    path = context.resolve(params.path)
    if not path.exists():
        raise ToolError(f"File not found: {path}")
    if path.is_dir():
        raise ToolError(f"{path} is a directory; list it with bash (ls) instead")
    mime = IMAGE_TYPES.get(path.suffix.lower())
    out.details["path"] = str(path)
    if mime is not None:
        size = path.stat().st_size
        if size > out.policy.max_image_bytes:
            raise ToolError(
                f"{path} is {size} bytes, over the {out.policy.max_image_bytes}-byte image limit; "
                "downscale it first (e.g. with bash)"
            )
        out.image(image_block(path.read_bytes(), mime))
        out.write(f"Read image file {path.name} [{mime}, {size} bytes]")
        out.details["mime_type"] = mime
        return
    start = params.offset or 1
    try:
        shown, more = await _read_lines(path, start, params.limit, cancel, out)
    except OSError as exc:
        raise ToolError(f"Cannot read {path}: {exc.strerror or exc}") from exc
    _finish(out, path, start, shown, more, cancel)


def _finish(
    out: ToolOutput, path: object, start: int, shown: int, more: bool, cancel: asyncio.Event
) -> None:
    """Details and the continuation footer, from the sink's totals (local or remote)."""
    if cancel.is_set():
        return
    if shown == 0 and start > 1:
        raise ToolError(f"offset {start} is past the end of {path}")
    t = out.truncation
    out.details["lines"] = shown
    if t["truncated"]:
        # The last shown line may be cut mid-line; continue from it so nothing is skipped.
        ends_clean = out.text.endswith("\n")
        last = start + t["output_lines"] - 1
        nxt = last + 1 if ends_clean else last
        total = start - 1 + t["total_lines"]
        out.footer(
            f"{'' if ends_clean else chr(10)}[Showing lines {start:,}-{last:,} of {total:,} "
            f"({format_bytes(t['output_bytes'])} of {format_bytes(t['total_bytes'])}). "
            f"Use offset={nxt} to continue.]"
        )
    elif more:
        text = out.text
        sep = "\n" if text and not text.endswith("\n") else ""
        out.footer(
            f"{sep}[Showing lines {start:,}-{start + shown - 1:,}. More lines follow; "
            f"use offset={start + shown} to continue.]"
        )


async def _read_remote(
    env: RemoteExecEnv,
    params: ReadParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """The same read on the exec host's file system (spill files named in a remote
    ``bash`` footer are read this way): the host sends one bounded window."""
    where = {"path": params.path, "cwd": str(context.cwd)}
    info = await call_op(env, "stat", where, cancel)
    path = str(info["path"])
    if not info["exists"]:
        raise ToolError(f"File not found: {path}")
    if info["is_dir"]:
        raise ToolError(f"{path} is a directory; list it with bash (ls) instead")
    out.details["path"] = path
    mime = IMAGE_TYPES.get(PurePosixPath(path).suffix.lower())
    if mime is not None:
        limit = out.policy.max_image_bytes
        got = await call_op(env, "read_bytes", {**where, "max_bytes": limit}, cancel)
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
            "limit": params.limit,
            "max_bytes": out.policy.max_bytes,
            "max_lines": out.policy.max_lines,
        },
        cancel,
    )
    out.feed(window_update(window))
    _finish(out, path, start, int(window["shown"]), bool(window["more"]), cancel)


async def _read_lines(
    path: Path, start: int, limit: int | None, cancel: asyncio.Event, out: ToolOutput
) -> tuple[int, bool]:
    """Write lines ``start``.. (at most ``limit``) into ``out``; return (lines written,
    whether lines remain past the limit).

    Lines split on ``\\n`` only, as the sink counts them. Once the head window is
    full (and no limit was asked for) the rest of the file is streamed in large
    blocks through an incremental decoder, so the totals stay exact without a
    Python-level loop over every remaining line.
    """
    shown = 0
    block: list[bytes] = []
    size = 0
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if lineno < start:
                continue
            if limit is not None and shown >= limit:
                out.write(b"".join(block).decode("utf-8", "replace"))
                return shown, True
            block.append(raw)
            size += len(raw)
            shown += 1
            if size >= _BLOCK_BYTES:
                out.write(b"".join(block).decode("utf-8", "replace"))
                block, size = [], 0
                await asyncio.sleep(0)  # let updates publish and cancellation land
                if cancel.is_set():
                    return shown, False
                if limit is None and out.truncation["truncated"]:
                    break
        else:
            out.write(b"".join(block).decode("utf-8", "replace"))
            return shown, False
        # Head window full: count the rest exactly, a megabyte at a time.
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while chunk := f.read(_COUNT_BLOCK_BYTES):
            shown += chunk.count(b"\n")
            out.write(decoder.decode(chunk))
            await asyncio.sleep(0)
            if cancel.is_set():
                return shown, False
        out.write(decoder.decode(b"", final=True))
    return shown, False


READ = Tool(
    name="read",
    description=(run_read.__doc__ or "").replace("\n    ", " ").strip(),
    params=ReadParams,
    execute=run_read,
    output=READ_OUTPUT,
    replay_safe=True,
)
"""The ``read`` tool definition (replay-safe: reading has no side effects)."""
