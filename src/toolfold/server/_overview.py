"""``GET /v1/overview``: every stored session and live lane, most recent activity first, paged.

The viewer's landing page. Its cost is bounded per page, not per store: listing the
names is one store query; ordering them by activity costs one ``stat`` of each
session's spill directory (its modification time changes whenever a command there
creates or removes a spill file) and reads nothing in the store; only the sessions on
the requested page are opened, each with a fixed number of small reads (counts, the
last ``STATUS_WINDOW`` call summaries, the last call's run record). Sessions with no
spill directory (a store other programs write, a memory store) have no known
activity: they follow, by name.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolfold.harness import Lanes
from toolfold.history import call_count, list_calls, process_alive
from toolfold.storage import SessionNotFoundError, StorageError

from ._sessions import SessionPool
from ._spill import SpillDirs

__all__ = ["DEFAULT_OVERVIEW_LIMIT", "MAX_OVERVIEW_LIMIT", "STATUS_WINDOW", "overview_route"]

DEFAULT_OVERVIEW_LIMIT = 25
"""Sessions per page unless ``?limit=`` says otherwise."""

MAX_OVERVIEW_LIMIT = 100
"""Largest ``?limit=``."""

STATUS_WINDOW = 200
"""How many of a session's most recent settled calls its status counts cover."""

MAX_UNSETTLED_CHECKED = 20
"""Unsettled calls per session whose process is checked for "running"."""


def _activity(spill_dirs: SpillDirs | None, names: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    if spill_dirs is None or not names:
        return out
    wanted = set(names)
    parent = spill_dirs(names[0]).parent
    if all(spill_dirs(n) == parent / n for n in names[:8]):
        # The usual layout (<home>/spill/<session>): one listing of the parent, then a
        # stat of the directories that exist only.
        try:
            with os.scandir(parent) as entries:
                for entry in entries:
                    if entry.name in wanted:
                        try:
                            out[entry.name] = entry.stat(follow_symlinks=False).st_mtime
                        except OSError:
                            continue
        except OSError:
            pass
        return out
    for name in names:
        try:
            out[name] = os.stat(spill_dirs(name), follow_symlinks=False).st_mtime
        except (OSError, ValueError):
            continue
    return out


def _lane_summary(lanes: Lanes, name: str) -> dict[str, Any]:
    host = lanes.get(name)
    if host is None:
        return {"lane": name, "calls": 0, "running": 0, "statuses": {}, "subscribers": 0}
    view = host.view
    statuses: dict[str, int] = {}
    last: dict[str, Any] | None = None
    for tid in view["order"]:
        tool = view["tools"].get(tid)
        if tool is None:
            continue
        statuses[tool["status"]] = statuses.get(tool["status"], 0) + 1
        args = tool.get("args")
        command = args.get("command") if isinstance(args, dict) else None
        last = {
            "tool_call_id": tid,
            "tool_name": tool["tool_name"],
            "command": command if isinstance(command, str) else None,
            "args": args,
            "status": tool["status"],
        }
    return {
        "lane": name,
        "calls": len(view["order"]),
        "running": statuses.get("running", 0),
        "statuses": statuses,
        "subscribers": host.subscribers,
        "last": last,
    }


async def _session_summary(
    pool: SessionPool, name: str, running_here: Callable[[str, str], bool]
) -> dict[str, Any]:
    async with pool.use(name) as session:
        total, unsettled = await call_count(session)
        summaries = await session.read_entries(
            order="desc", keyed=True, limit=STATUS_WINDOW, summaries=True
        )
        statuses: dict[str, int] = {}
        for entry in summaries:
            s = entry.summary if isinstance(entry.summary, dict) else {}
            status = str(s.get("outcome", "error" if s.get("is_error") else "ok"))
            statuses[status] = statuses.get(status, 0) + 1
        running = 0
        last: dict[str, Any] | None = None
        if total:
            shown = await list_calls(
                session, last=max(1, min(unsettled, MAX_UNSETTLED_CHECKED)), messages=False
            )
            live = {
                c.tool_call_id
                for c in shown
                if not c.settled and (process_alive(c.record) or running_here(name, c.tool_call_id))
            }
            running = len(live)
            call = shown[-1]
            record = call.record if isinstance(call.record, dict) else {}
            last = {
                "tool_call_id": call.tool_call_id,
                "tool_name": call.tool_name,
                "command": call.summary,
                "status": "running" if call.tool_call_id in live else call.status,
                "started_at": record.get("started_at"),
                "ended_at": record.get("ended_at"),
            }
    if running:
        statuses["running"] = running
    if unsettled > running:
        statuses["unsettled"] = unsettled - running
    return {
        "name": name,
        "calls": total,
        "statuses": statuses,
        "status_window": STATUS_WINDOW,
        "running": running,
        "last": last,
    }


def overview_route(
    pool: SessionPool | None,
    lanes: Lanes,
    spill_dirs: SpillDirs | None,
    running_here: Callable[[str, str], bool],
) -> Any:
    """The route's handler."""

    async def overview(request: Request) -> Response:
        params = request.query_params
        raw_offset = params.get("offset", "0")
        raw_limit = params.get("limit", str(DEFAULT_OVERVIEW_LIMIT))
        if not raw_offset.isdigit() or not raw_limit.isdigit():
            return JSONResponse(
                {
                    "error": f"offset and limit must be whole numbers, got {raw_offset!r}, "
                    f"{raw_limit!r}"
                },
                status_code=400,
            )
        offset, limit = int(raw_offset), int(raw_limit)
        if not 1 <= limit <= MAX_OVERVIEW_LIMIT:
            return JSONResponse(
                {"error": f"limit must be from 1 to {MAX_OVERVIEW_LIMIT}, got {limit}"},
                status_code=400,
            )
        lane_items = [_lane_summary(lanes, n) for n in lanes.names()]
        lane_items = [x for x in lane_items if x["calls"] or x["subscribers"]]
        if pool is None:
            return JSONResponse({"lanes": lane_items, "sessions": [], "total": 0, "offset": 0})
        try:
            names = await pool.list_sessions()
        except StorageError as exc:
            return JSONResponse(
                {"error": f"the session store failed to list sessions: {exc}"}, status_code=503
            )
        activity = await asyncio.to_thread(_activity, spill_dirs, names)
        names.sort(key=lambda n: (-activity.get(n, float("-inf")), n))
        page = names[offset : offset + limit]
        items = []
        for name in page:
            try:
                item = await _session_summary(pool, name, running_here)
            except SessionNotFoundError:
                continue  # deleted since the listing
            except Exception as exc:  # one damaged session must not blank the page
                item = {"name": name, "error": " ".join(str(exc).split())}
            item["activity"] = activity.get(name)
            item["live_lane"] = lanes.get(name) is not None
            items.append(item)
        return JSONResponse(
            {"lanes": lane_items, "sessions": items, "total": len(names), "offset": offset}
        )

    return overview
