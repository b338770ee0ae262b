"""A tiny pytest plugin that reports progress as JSON lines on a file descriptor.

Loaded into the child pytest by the ``pytest`` tool (``-p
toolfold.tools._pytest_plugin``); the descriptor number is in
``TOOLFOLD_PYTEST_FD``. A dedicated pipe (not stdout) keeps progress apart from the
test output the model reads, whatever pytest's capture mode does.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

_FD_ENV = "TOOLFOLD_PYTEST_FD"
MAX_MESSAGE_CHARS = 2000


def _emit(event: dict[str, Any]) -> None:
    fd = os.environ.get(_FD_ENV)
    if fd is None:
        return
    data = (json.dumps(event) + "\n").encode("utf-8", "replace")
    # The tool may have gone away; the run itself must not fail because of it.
    with contextlib.suppress(OSError):
        os.write(int(fd), data)


def pytest_collection_finish(session: Any) -> None:
    _emit({"event": "collected", "total": len(session.items)})


def pytest_runtest_logstart(nodeid: str, location: Any) -> None:
    _emit({"event": "start", "nodeid": nodeid})


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = report.outcome
        message = ""
        if report.failed:
            message = str(getattr(report, "longreprtext", "") or "")
            if len(message) > MAX_MESSAGE_CHARS:
                message = "..." + message[-MAX_MESSAGE_CHARS:]
            outcome = "failed"
        _emit({"event": "result", "nodeid": report.nodeid, "outcome": outcome, "message": message})
    elif report.when == "teardown" and report.failed:
        _emit(
            {
                "event": "result",
                "nodeid": report.nodeid,
                "outcome": "failed",
                "message": str(getattr(report, "longreprtext", ""))[-MAX_MESSAGE_CHARS:],
            }
        )


def pytest_runtest_logfinish(nodeid: str, location: Any) -> None:
    _emit({"event": "finish", "nodeid": nodeid})
