"""The toolfold web server: SSE lane subscriptions, a small JSON API and the live viewer.

``create_app(lanes=..., run_command=..., repository=...)`` builds a Starlette app;
feed it harness events through ``lanes.handle`` (a ``toolfold.harness.Lanes``), or
let ``HarnessCommands(lanes)`` run commands through a harness whose bus does that.
Given the same store (``HarnessCommands(lanes, repository=repo)`` and
``create_app(..., repository=repo)``), posted commands are durable — lane ``L`` is
session ``L`` — and ``GET /v1/sessions/{name}/calls`` serves a session's history.
"""

from __future__ import annotations

from ._app import CommandRunner, SessionLister, ViewerState, create_app, stop_streams
from ._commands import HarnessCommands
from ._errors import CommandRejectedError, ServerError
from ._sessions import SessionPool, session_pool

__all__ = [
    "CommandRejectedError",
    "CommandRunner",
    "HarnessCommands",
    "ServerError",
    "SessionLister",
    "SessionPool",
    "ViewerState",
    "create_app",
    "session_pool",
    "stop_streams",
]
