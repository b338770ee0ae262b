"""The toolfold web server: SSE lane subscriptions, a small JSON API and the live viewer.

``create_app(lanes=..., run_command=..., repository=...)`` builds a Starlette app;
feed it harness events through ``lanes.handle`` (a ``toolfold.harness.Lanes``), or
let ``HarnessCommands(lanes)`` run commands through a harness whose bus does that.
"""

from __future__ import annotations

from ._app import CommandRunner, SessionLister, ViewerState, create_app, stop_streams
from ._commands import HarnessCommands

__all__ = [
    "CommandRunner",
    "HarnessCommands",
    "SessionLister",
    "ViewerState",
    "create_app",
    "stop_streams",
]
