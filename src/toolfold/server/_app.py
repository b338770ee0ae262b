"""The Starlette app: SSE lane subscriptions, a small JSON API and the web viewer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from toolfold.harness import DurabilityError, LaneError, Lanes, RecoveryError
from toolfold.history import (
    CallView,
    call_count,
    check_session_name,
    list_calls,
    pending_output,
    process_alive,
)
from toolfold.storage import Repository, SessionNotFoundError, StorageError

from ._errors import ServerError
from ._follow import Followers
from ._guard import Guard, GuardConfig, allowed_hosts
from ._janitor import OrphanJanitor
from ._output import output_route
from ._overview import overview_route
from ._sessions import SessionPool, session_pool
from ._spill import LineIndex, SpillDirs

__all__ = ["CommandRunner", "SessionLister", "ViewerState", "create_app", "stop_streams"]

STATIC_DIR = Path(__file__).resolve().parent / "static"

MAX_COMMAND_BYTES = 64 * 1024
"""Longest command the API accepts (a command is a shell line, not a payload channel)."""

MAX_BODY_BYTES = 6 * MAX_COMMAND_BYTES + 1024
"""Largest request body: a command at the limit written as JSON (an escape such as
``\\u0001`` takes six bytes for one) plus room for the envelope."""

MAX_LANES = 256
"""Most lanes the server holds. A command creates its lane (a GET only opens the
default lane or a stored session's); at the limit, an idle lane (no call running,
nobody subscribed) is dropped to make room, and a new lane is refused only while
all of them are busy."""

TOKEN_HINT = (
    "open the viewer URL that `toolfold serve` printed at start (it carries ?token=), "
    "or send 'Authorization: Bearer <token>' (the token given with --token or TOOLFOLD_TOKEN)"
)
"""How a 401 answer says to get the token."""

DEFAULT_CALLS_LIMIT = 100
"""How many of a session's most recent calls ``GET /v1/sessions/{name}/calls`` returns
unless ``?limit=`` says otherwise (each carries up to one output window)."""

MAX_CALLS_LIMIT = 1000
"""Largest ``?limit=``."""

_LIMIT = re.compile(r"[0-9]{1,9}")

_LANE_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

CommandRunner = Callable[[str, str], Awaitable[str]]
"""``await runner(lane, command) -> tool_call_id``: start a bash tool call in ``lane``.

It must return once the call has started (its events flow to the lanes); it must
not wait for the command to finish.
"""


class SessionLister(Protocol):
    """What ``GET /v1/sessions`` needs from a store (``toolfold.storage.Repository`` fits)."""

    async def list_sessions(self) -> list[str]: ...


class ViewerState:
    """What the app holds: the lanes, the command runner, the session store (and, for a
    ``toolfold.storage`` repository, the pool of its open sessions)."""

    def __init__(
        self,
        lanes: Lanes,
        run_command: CommandRunner | None,
        repository: SessionLister | None,
        sessions: SessionPool | None = None,
        guard: GuardConfig | None = None,
    ) -> None:
        self.lanes = lanes
        self.run_command = run_command
        self.repository = repository
        self.sessions = sessions
        self.followers: Followers | None = None
        """Follows stored sessions into their lanes (a store other processes write)."""
        self.guard = guard
        """The checks in front of every route (``guard.token`` is the server's token)."""

    def stop_streams(self) -> None:
        """End every SSE subscription (call on the app's event loop before stopping the server)."""
        self.lanes.close()


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _check_lane_name(lane: str) -> str | None:
    if not _LANE_NAME.match(lane):
        return (
            f"lane name {lane!r} is not allowed: use 1-64 characters from "
            "letters, digits, '.', '_' and '-'"
        )
    return None


def _make_room(lanes: Lanes, lane: str) -> str | None:
    """Room for ``lane`` (an idle lane is dropped at the limit), or why there is none."""
    if lanes.get(lane) is not None or len(lanes.names()) < MAX_LANES:
        return None
    # Oldest first: the lanes longest unused are likeliest to be done with.
    if any(lanes.discard(name) for name in lanes.names()):
        return None
    return (
        f"lane {lane!r} does not exist and all {MAX_LANES} lanes of this server are busy "
        "(a call running or a viewer subscribed); use an existing lane (GET /v1/lanes) "
        "or retry once one is idle"
    )


def create_app(
    *,
    lanes: Lanes | None = None,
    run_command: CommandRunner | None = None,
    repository: Repository | SessionPool | SessionLister | str | None = None,
    keepalive: float = 15.0,
    token: str | None = None,
    allow_hosts: Iterable[str] = (),
    janitor: OrphanJanitor | None = None,
    spill_dirs: SpillDirs | None = None,
) -> Starlette:
    """Build the viewer app, behind a ``Guard`` (see ``toolfold.server.Guard``).

    - ``token`` is the secret every request must carry (a random one when omitted:
      read it back as ``app.state.toolfold.guard.token``); ``allow_hosts`` are the
      ``Host`` names accepted besides ``localhost``, ``127.0.0.1`` and ``[::1]``.
      ``ValueError`` names a token or host that cannot be used.

    - ``lanes`` receives the harness's events (attach ``lanes.handle`` to the
      harness bus); a fresh ``Lanes`` is made when omitted.
    - ``run_command(lane, command)`` backs ``POST /v1/lanes/{lane}/commands``
      (``HarnessCommands(lanes)`` runs each as a ``bash`` call through the
      harness); without it the endpoint answers 501. A runner with an ``aclose()``
      coroutine is closed on shutdown.
    - ``repository`` backs ``GET /v1/sessions`` and ``GET /v1/sessions/{name}/calls``:
      a ``toolfold.storage`` repository (or its ``SessionPool``), a store URL opened
      with ``toolfold.storage.open_repository`` (and closed on shutdown), or anything
      with ``list_sessions()`` (then only the list is served). Give the same
      repository to ``HarnessCommands(lanes, repository=...)`` to make posted
      commands durable: both then share one ``SessionPool``.

    Routes: ``GET /`` (viewer), ``GET /static/*``, ``GET /v1/lanes``,
    ``GET /v1/lanes/{lane}/state`` (SSE; 404 for a lane that does not exist),
    ``POST /v1/lanes/{lane}/commands`` (creates the lane), ``GET /v1/sessions``,
    ``GET /v1/sessions/{name}/calls``. An idle SSE stream sends a comment every
    ``keepalive`` seconds. On shutdown every subscription ends.

    ``spill_dirs(session)`` names the directory holding a session's spill files
    (``toolfold serve``: ``<store home>/spill/<session>``); with it,
    ``GET /v1/sessions/{name}/calls/{call}/output`` serves a call's full output, paged
    by bytes or lines, or as a download — only files directly inside that directory,
    reached through no symlink (see ``toolfold.server._output``).

    A ``janitor`` (``OrphanJanitor``) runs in the background from startup to shutdown,
    settling the calls of dead hosts in the store.
    """
    guard = GuardConfig(
        token=token if token is not None else secrets.token_urlsafe(32),
        allowed_hosts=allowed_hosts(allow_hosts),
        max_body_bytes=MAX_BODY_BYTES,
        token_hint=TOKEN_HINT,
    )
    owned_store: Any = None
    store: Any
    if isinstance(repository, str):
        from toolfold.storage import open_repository

        owned_store = store = open_repository(repository)
    else:
        store = repository
    pool = session_pool(store) if isinstance(store, Repository | SessionPool) else None
    state = ViewerState(lanes if lanes is not None else Lanes(), run_command, store, pool, guard)
    if pool is not None:
        state.followers = Followers(pool, state.lanes)

    async def stored_session(name: str) -> bool:
        if state.sessions is None or check_session_name(name) is not None:
            return False
        try:
            return name in await state.sessions.list_sessions()
        except StorageError:
            return False

    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", media_type="text/html")

    async def list_lanes(request: Request) -> Response:
        out = []
        for name in state.lanes.names():
            host = state.lanes.host(name)
            view = host.view
            out.append(
                {
                    "lane": name,
                    "tools": len(view["order"]),
                    "running": sum(1 for t in view["tools"].values() if t["status"] == "running"),
                    "subscribers": host.subscribers,
                }
            )
        return JSONResponse({"lanes": out})

    async def lane_state(request: Request) -> Response:
        lane = request.path_params["lane"]
        problem = _check_lane_name(lane)
        if problem:
            return _error(404, problem)
        stored = await stored_session(lane)
        if not stored and lane != state.lanes.default_lane and lane not in state.lanes.names():
            return _error(
                404,
                f"no lane or stored session named {lane!r}; GET /v1/lanes and GET /v1/sessions "
                "list them (posting a command to a lane creates it)",
            )
        problem = _make_room(state.lanes, lane)
        if problem:
            return _error(503, problem)
        try:
            sub = state.lanes.host(lane).subscribe()
        except LaneError as exc:
            return _error(503, str(exc))
        if stored and state.followers is not None:
            # Lane L is session L: what other processes run in it shows up live.
            state.followers.ensure(lane)

        async def events() -> AsyncIterator[str]:
            try:
                # A comment first so proxies and clients see the stream open at once.
                yield ": toolfold lane " + lane + "\n\n"
                while True:
                    batch = sub.next_nowait()
                    if batch is None:
                        if sub.closed:
                            return
                        try:
                            await asyncio.wait_for(sub.wait(), keepalive)
                        except TimeoutError:
                            # An idle stream still writes now and then, so a client
                            # that went away is noticed (and its subscription freed).
                            yield ": keepalive\n\n"
                        continue
                    # Wire JSON has no raw newlines (JSON escapes them), so one
                    # `data:` line carries the batch.
                    yield f"id: {batch.id}\ndata: {batch.data}\n\n"
            finally:
                sub.close()
                # A lane that holds no call and that nobody watches any more (a GET
                # opened it: the default lane, a stored session's) is not kept.
                host = state.lanes.get(lane)
                if host is not None and not host.view["order"]:
                    state.lanes.discard(lane)

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def post_command(request: Request) -> Response:
        lane = request.path_params["lane"]
        problem = _check_lane_name(lane)
        if problem:
            return _error(404, problem)
        if state.run_command is None:
            return _error(
                501,
                "this server has no command runner; start it with "
                "create_app(lanes=lanes, run_command=HarnessCommands(lanes))",
            )
        # The guard has already bounded the body (MAX_BODY_BYTES) and its nesting.
        body = await request.body()
        try:
            payload = json.loads(body)
        except ValueError as exc:
            return _error(400, f'body is not JSON ({exc}); send {{"command": "..."}}')
        command = payload.get("command") if isinstance(payload, dict) else None
        if not isinstance(command, str) or not command.strip():
            return _error(
                400,
                f'field "command" must be a non-empty string, got {command!r}; send {{"command": "ls"}}',
            )
        if len(command.encode("utf-8", "surrogatepass")) > MAX_COMMAND_BYTES:
            return _error(413, f"command is longer than {MAX_COMMAND_BYTES} bytes; shorten it")
        problem = _make_room(state.lanes, lane)
        if problem:
            return _error(503, problem)
        # The lane exists from here on, so a viewer can subscribe as soon as we answer.
        created = state.lanes.get(lane) is None
        state.lanes.host(lane)
        try:
            tool_call_id = await state.run_command(lane, command)
        except ServerError as exc:
            if created:
                state.lanes.discard(lane)  # refused: the lane holds nothing
            return _error(exc.status, str(exc))
        return JSONResponse({"lane": lane, "tool_call_id": tool_call_id}, status_code=202)

    async def list_sessions(request: Request) -> Response:
        if state.repository is None:
            return JSONResponse({"sessions": []})
        try:
            sessions = await state.repository.list_sessions()
        except Exception as exc:  # a store failure is reported, not a crash of the viewer
            return _error(503, f"the session store failed to list sessions: {exc}")
        return JSONResponse({"sessions": sorted(sessions)})

    async def session_calls(request: Request) -> Response:
        name = request.path_params["name"]
        problem = check_session_name(name)
        if problem is not None:
            return _error(400, f"{problem}; GET /v1/sessions lists the sessions")
        raw_limit = request.query_params.get("limit", str(DEFAULT_CALLS_LIMIT))
        # At most 9 ASCII digits before int(): a 5,000-digit number is past Python's
        # int-conversion limit (a ValueError, which would be a 500).
        if _LIMIT.fullmatch(raw_limit) is None or not 1 <= int(raw_limit) <= MAX_CALLS_LIMIT:
            given = (
                raw_limit
                if len(raw_limit) <= 24
                else f"{raw_limit[:20]}... ({len(raw_limit):,} characters)"
            )
            return _error(
                400,
                f"limit must be an integer from 1 to {MAX_CALLS_LIMIT}, got {given!r} "
                f"(the default is {DEFAULT_CALLS_LIMIT})",
            )
        if state.sessions is None:
            return _error(
                501,
                "this server has no session store to read calls from; start it with "
                "create_app(repository=...) (or `toolfold serve --store URL`)",
            )
        try:
            async with state.sessions.use(name) as session:
                total, _ = await call_count(session)
                shown = await list_calls(session, last=int(raw_limit))
                items = [await _call_json(session, name, call) for call in shown]
        except SessionNotFoundError:
            try:
                names = await state.sessions.list_sessions()
            except StorageError:
                names = []
            known = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "") if names else "none"
            return _error(
                404, f"no session {name!r} in the store (sessions: {known}); GET /v1/sessions"
            )
        except StorageError as exc:
            return _error(
                503, f"the session store cannot read session {name!r}: {' '.join(str(exc).split())}"
            )
        except DurabilityError as exc:
            # A durable record the harness cannot read back: the store is damaged there.
            return _error(
                503,
                f"session {name!r} holds durable records that cannot be read: "
                f"{' '.join(str(exc).split())}",
            )
        return JSONResponse({"session": name, "total": total, "calls": items})

    async def _call_json(session: Any, name: str, call: CallView) -> dict[str, Any]:
        record = call.record if isinstance(call.record, dict) else {}
        item: dict[str, Any] = {
            "number": call.number,
            "tool_call_id": call.tool_call_id,
            "tool_name": call.tool_name,
            "status": call.status,
            "settled": call.settled,
            "command": call.summary,
            "args": call.args,
            "message": call.message,
            "truncation": record.get("truncation"),
            "spill_path": record.get("spill_path"),
            "started_at": record.get("started_at"),
            "ended_at": record.get("ended_at"),
        }
        where = record.get("spill_dir")
        if isinstance(where, str) and where and not where.startswith("/"):
            item["exec_host"] = where  # a remote run: its spill file is on that host
        if not call.settled:
            item["running"] = process_alive(call.record) or _running_here(name, call.tool_call_id)
            try:
                item["state"] = await pending_output(session, call)
            except RecoveryError as exc:
                item["state"] = None
                item["error"] = (
                    f"cannot recover the pending output of call {call.tool_call_id}: {exc}"
                )
        return item

    def _running_here(lane: str, tool_call_id: str) -> bool:
        # This server's own commands: its lane view knows whether the call still runs
        # (process_alive deliberately says no for this process's own pid).
        host = state.lanes.get(lane)
        if host is None:
            return False
        tool = host.view["tools"].get(tool_call_id)
        return bool(tool and tool.get("status") == "running")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        sweeping = asyncio.get_running_loop().create_task(janitor.run()) if janitor else None
        try:
            yield
        finally:
            if sweeping is not None:
                # First, so no takeover starts while the rest shuts down.
                sweeping.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeping
            # Runs still going are cancelled first (their partial output settles),
            # then every subscription ends.
            aclose = getattr(state.run_command, "aclose", None)
            if aclose is not None:
                await aclose()
            if state.followers is not None:
                await state.followers.aclose()
            state.stop_streams()
            if owned_store is not None:
                await owned_store.close()

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/v1/lanes", list_lanes),
            Route("/v1/lanes/{lane}/state", lane_state),
            Route("/v1/lanes/{lane}/commands", post_command, methods=["POST"]),
            Route("/v1/sessions", list_sessions),
            Route(
                "/v1/overview",
                overview_route(
                    pool,
                    state.lanes,
                    spill_dirs,
                    lambda lane, tid: _running_here(lane, tid),
                ),
            ),
            Route("/v1/sessions/{name}/calls", session_calls),
            Route(
                "/v1/sessions/{name}/calls/{call}/output",
                output_route(pool, spill_dirs, LineIndex()),
            ),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ],
        lifespan=lifespan,
        middleware=[Middleware(Guard, config=guard)],
    )
    app.state.toolfold = state
    return app


def stop_streams(app: Starlette) -> None:
    """End every SSE subscription of ``app`` so a server can stop without waiting on them.

    Uvicorn waits for open responses before it runs the lifespan shutdown, so a
    host stopping uvicorn calls this first (on the app's event loop).
    """
    state: Any = app.state.toolfold
    state.stop_streams()
