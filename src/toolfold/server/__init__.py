"""The toolfold web server: SSE lane subscriptions, a small JSON API and the live viewer.

``create_app(lanes=..., run_command=..., repository=...)`` builds a Starlette app;
feed it harness events through ``lanes.handle`` (a ``toolfold.harness.Lanes``), or
let ``HarnessCommands(lanes)`` run commands through a harness whose bus does that.
Given the same store (``HarnessCommands(lanes, repository=repo)`` and
``create_app(..., repository=repo)``), posted commands are durable — lane ``L`` is
session ``L`` — and ``GET /v1/sessions/{name}/calls`` serves a session's history.

Every route sits behind a ``Guard`` (token, Host allowlist, Origin, body limits;
``docs/security.md``). ``Guard`` is plain ASGI middleware with a ``GuardConfig``, so
any other HTTP endpoint of toolfold can put the same checks in front of its app.
"""

from __future__ import annotations

from ._app import CommandRunner, SessionLister, ViewerState, create_app, stop_streams
from ._commands import HarnessCommands
from ._errors import CommandRejectedError, ServerError
from ._guard import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_JSON_DEPTH,
    LOOPBACK_HOSTS,
    Guard,
    GuardConfig,
    allowed_hosts,
)
from ._http import HEADER_TIMEOUT, http_protocol
from ._janitor import OrphanJanitor
from ._sessions import SessionPool, session_pool

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_JSON_DEPTH",
    "HEADER_TIMEOUT",
    "LOOPBACK_HOSTS",
    "CommandRejectedError",
    "CommandRunner",
    "Guard",
    "GuardConfig",
    "HarnessCommands",
    "OrphanJanitor",
    "ServerError",
    "SessionLister",
    "SessionPool",
    "ViewerState",
    "allowed_hosts",
    "create_app",
    "http_protocol",
    "session_pool",
    "stop_streams",
]
