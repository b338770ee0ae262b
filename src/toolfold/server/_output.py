"""``GET /v1/sessions/{name}/calls/{call}/output``: a stored call's full output.

The answer is one page of the call's spill file, as JSON:

- ``?offset=B&length=N``: bytes ``[B, B+N)`` (``N`` at most ``MAX_PAGE_BYTES``) as text;
- ``?line=L&lines=N``: ``N`` lines from 1-based line ``L`` (at most ``MAX_PAGE_LINES``,
  and at most ``MAX_PAGE_BYTES`` of them), found through the cached ``LineIndex``;
- ``?find=TEXT&from_line=L``: the next line at or after ``L`` containing ``TEXT`` (a
  literal, case-sensitive substring of the UTF-8 bytes): ``{"line": N}`` or, with no
  match, ``{"line": null}``. One answer scans at most ``MAX_FIND_BYTES``; when that
  runs out first, ``"stopped_at_line"`` says where to go on from (``from_line=`` it);
- ``?download=1``: the raw file, streamed (``Content-Disposition: attachment``).

The path is the one the store recorded for the call; ``_spill.open_spill`` decides
whether it may be served. A spill file on an exec host (a remote run) is not here:
the answer is 404 with ``exec_host`` naming where it is.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from toolfold.harness import RecoveryError
from toolfold.history import check_session_name, lookup_call, pending_output
from toolfold.storage import SessionNotFoundError, StorageError

from ._sessions import SessionPool
from ._spill import (
    MAX_PAGE_BYTES,
    MAX_PAGE_LINES,
    LineIndex,
    SpillDirs,
    SpillFile,
    SpillRefusedError,
    find_line,
    open_spill,
    read_lines,
)

__all__ = ["DEFAULT_PAGE_LINES", "MAX_FIND_BYTES", "MAX_FIND_NEEDLE", "output_route"]

_SAFE = re.compile(r"[^A-Za-z0-9._-]")

DEFAULT_PAGE_LINES = 200
"""Lines a line page carries unless ``?lines=`` says otherwise."""

MAX_FIND_BYTES = 256 * 1024 * 1024
"""Most bytes one ``?find=`` answer scans (a worker thread is busy that long); the
client goes on from ``stopped_at_line``."""

MAX_FIND_NEEDLE = 1024
"""Longest ``?find=`` text, in UTF-8 bytes."""


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int | str:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not low <= int(raw) <= high:
        return f"{name} must be an integer from {low} to {high}, got {raw!r}"
    return int(raw)


def output_route(pool: SessionPool | None, spill_dirs: SpillDirs | None, index: LineIndex) -> Any:
    """The route's handler, for a server with session pool ``pool``."""

    async def call_output(request: Request) -> Response:
        name = request.path_params["name"]
        wanted = request.path_params["call"]
        problem = check_session_name(name)
        if problem is not None:
            return _error(400, f"{problem}; GET /v1/sessions lists the sessions")
        if pool is None or spill_dirs is None:
            return _error(
                501,
                "this server does not serve spill files; `toolfold serve` does (create_app("
                "repository=..., spill_dirs=lambda session: <that session's spill directory>))",
            )
        try:
            async with pool.use(name) as session:
                calls = [
                    c
                    for c in await lookup_call(session, wanted)
                    if c.tool_call_id == wanted or str(c.number) == wanted
                ]
                if len(calls) != 1:
                    return _error(
                        404,
                        f"session {name!r} has {'no' if not calls else 'more than one'} call "
                        f"{wanted!r}; give its exact id or number "
                        f"(GET /v1/sessions/{name}/calls lists them)",
                    )
                call = calls[0]
                state: Any = None
                if not call.settled:
                    try:
                        state = await pending_output(session, call)
                    except RecoveryError:
                        state = None
        except SessionNotFoundError:
            return _error(404, f"no session {name!r} in the store; GET /v1/sessions lists them")
        except StorageError as exc:
            return _error(503, f"the session store cannot read session {name!r}: {exc}")
        record = call.record if isinstance(call.record, dict) else {}
        path = record.get("spill_path")
        if not isinstance(path, str) and isinstance(state, dict):
            path = state.get("spill_path")
        where = record.get("spill_dir")
        if isinstance(where, str) and where and not where.startswith("/"):
            # A remote run records "<transport>:<dir>": the file is on that host.
            shown = f"{where}/{path.rsplit('/', 1)[-1]}" if isinstance(path, str) else where
            return _error(
                404,
                f"call {call.tool_call_id} ran on an exec host: its full output is at "
                f"{shown} there, not on this server",
                exec_host=shown,
            )
        if not isinstance(path, str):
            return _error(
                404,
                f"call {call.tool_call_id} has no spill file recorded (it produced none, or "
                "it was not run by a toolfold host that records one)",
            )
        try:
            file = await asyncio.to_thread(open_spill, spill_dirs(name), path)
        except SpillRefusedError as exc:
            return _error(exc.status, str(exc))
        if request.query_params.get("download") == "1":
            return _download(file, call.tool_call_id)
        try:
            return await asyncio.to_thread(_page, request, file, index)
        finally:
            file.close()

    return call_output


def _download(file: SpillFile, call_id: str) -> Response:
    def chunks() -> Iterator[bytes]:
        try:
            yield from file.chunks()
        finally:
            file.close()

    return StreamingResponse(
        chunks(),
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="{_SAFE.sub("_", call_id)}.log"',
            "Content-Length": str(file.size),
            "X-Content-Type-Options": "nosniff",
        },
    )


def _page(request: Request, file: SpillFile, index: LineIndex) -> Response:
    """One page of ``file`` (runs in a worker thread: it reads the disk)."""
    params = request.query_params
    if "find" in params:
        return _find(request, file, index)
    if "line" in params:
        line = _int_param(request, "line", 1, 1, 1 << 62)
        count = _int_param(request, "lines", DEFAULT_PAGE_LINES, 1, MAX_PAGE_LINES)
        if isinstance(line, str) or isinstance(count, str):
            return _error(400, str(line if isinstance(line, str) else count))
        start, total = index.line_offset(file, line)
        lines, next_offset, cut = read_lines(file, start, count)
        return JSONResponse(
            {
                "size": file.size,
                "line": line,
                "offset": start,
                "lines": lines,
                "next_offset": next_offset,
                "cut": cut,
                "total_lines": total,
                "eof": next_offset >= file.size,
            }
        )
    offset = _int_param(request, "offset", 0, 0, 1 << 62)
    length = _int_param(request, "length", 64 * 1024, 1, MAX_PAGE_BYTES)
    if isinstance(offset, str) or isinstance(length, str):
        return _error(
            400,
            str(offset if isinstance(offset, str) else length)
            + f" (a page is at most {MAX_PAGE_BYTES} bytes; or page by ?line=&lines=)",
        )
    data = file.read(offset, length)
    return JSONResponse(
        {
            "size": file.size,
            "offset": offset,
            "length": len(data),
            "text": data.decode("utf-8", "replace"),
            "next_offset": offset + len(data),
            "eof": offset + len(data) >= file.size,
        }
    )


def _find(request: Request, file: SpillFile, index: LineIndex) -> Response:
    """The next line holding ``?find=`` from ``?from_line=`` (worker thread: it reads)."""
    needle = request.query_params["find"].encode("utf-8", "replace")
    if not needle or len(needle) > MAX_FIND_NEEDLE:
        return _error(
            400,
            f"find must be 1 to {MAX_FIND_NEEDLE} bytes of text, got {len(needle)} bytes",
        )
    line = _int_param(request, "from_line", 1, 1, 1 << 62)
    if isinstance(line, str):
        return _error(400, line)
    start, _total = index.line_offset(file, line)
    match, stop = find_line(file, start, line, needle, MAX_FIND_BYTES)
    answer: dict[str, Any] = {"find": request.query_params["find"], "from_line": line}
    answer["line"] = match
    if stop is not None:
        # A line longer than the bound would stop at its own start again: go past it
        # (the rest of that one line is not searched).
        answer["stopped_at_line"] = max(stop, line + 1)
    return JSONResponse(answer)
