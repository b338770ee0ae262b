"""The MCP tasks extension (``io.modelcontextprotocol/tasks``, 2026-07-28): its wire
shapes, its settings, and the task records toolfold keeps in the store.

A task is a ``tools/call`` answered early with a handle (``resultType: "task"``); the
client polls ``tasks/get`` until the call ends. toolfold's call is already durable, so
a task is one more value beside it in the call's session: who may see it (the auth
context that made it), when it was made, when it goes, and, once the call ended, the
``CallToolResult`` it ended with. The record is committed before the handle is sent,
so a ``tasks/get`` for it always resolves, in this process or the next one.
"""

from __future__ import annotations

import datetime
import hashlib
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field

from toolfold.storage import value

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
"""The extension's identifier, advertised under ``capabilities.extensions``."""

TASK_NAMESPACE = "mcp.task"
"""Where a session keeps its task records (key: the task id's secret part)."""

TERMINAL = frozenset({"completed", "failed", "cancelled"})

NOT_FOUND = "Failed to retrieve task: Task not found"
"""The one answer to an unknown, expired or foreign task id (they look alike, so a
guessed id tells nothing)."""

UPSTREAM_KEY = "upstream_task"
"""The key of a proxy task's record that holds the upstream's task id."""

MAX_STATUS_CHARS = 4096
"""An upstream's status message is cut to this many characters on its way on."""

_TASK_ID = re.compile(r"([0-9a-f]{32})~([A-Za-z0-9_-][A-Za-z0-9._-]{0,127})")


@dataclass(frozen=True)
class TaskSettings:
    """When a call answers as a task, and how long its task is kept.

    ``after``: seconds a call of a client that negotiated the extension may run before
    the server answers with a task instead of waiting (0: every call is a task);
    ``per_tool`` overrides it for a tool by name (``None``: never a task); a tool in
    ``required`` is always a task, and refused to a request that did not negotiate
    the extension (-32021, as SEP-2663 says for a tool that cannot answer without
    one). ``ttl_ms``:
    how long a task is kept from its creation (a task still working is kept until it
    ends); ``poll_ms``: the polling interval suggested to the client."""

    after: float = 1.0
    per_tool: Mapping[str, float | None] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    ttl_ms: int = 3_600_000
    poll_ms: int = 1000
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if not self.after >= 0 or any(v is not None and not v >= 0 for v in self.per_tool.values()):
            raise ValueError("a task's start delay must be a number of seconds >= 0")
        if self.ttl_ms < 1 or self.poll_ms < 1:
            raise ValueError("a task's TTL and poll interval must be at least 1 ms")

    def after_for(self, tool: str) -> float | None:
        """Seconds a call of ``tool`` runs before it becomes a task (``None``: never)."""
        if tool in self.required:
            return 0.0
        return self.per_tool.get(tool, self.after)


# -- wire shapes (SEP-2663, 2026-07-28) ------------------------------------------------


class TaskParams(types.RequestParams):
    """``tasks/get`` and ``tasks/cancel`` params."""

    task_id: str = Field(alias="taskId", max_length=256)


class UpdateParams(TaskParams):
    """``tasks/update`` params."""

    input_responses: dict[str, Any] = Field(alias="inputResponses", default_factory=dict)


class _TaskFields(types.Result):
    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(alias="taskId")
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = Field(alias="statusMessage", default=None)
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(alias="ttlMs")
    poll_interval_ms: int | None = Field(alias="pollIntervalMs", default=None)


class CreateTaskResult(_TaskFields):
    """A ``tools/call`` answered with a task handle."""

    result_type: Literal["task"] = Field(alias="resultType", default="task")


class DetailedTask(_TaskFields):
    """A ``tasks/get`` answer: the task, with its result or error once it ended."""

    result_type: Literal["complete"] = Field(alias="resultType", default="complete")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(alias="inputRequests", default=None)


class Ack(types.Result):
    """The empty acknowledgement of ``tasks/update`` and ``tasks/cancel``."""

    result_type: Literal["complete"] = Field(alias="resultType", default="complete")


# -- negotiation and scope ----------------------------------------------------------------


def negotiated(protocol_version: str, meta: Any) -> bool:
    """Whether this request may be answered with a task: a 2026-07-28 request that
    declares the extension in its own capabilities (the SEP forbids a task for a
    request that did not, whatever was declared before). The SDK validates a 2025-era
    ``tools/call`` result as a ``CallToolResult``, so no task goes there."""
    if protocol_version not in MODERN_PROTOCOL_VERSIONS or not isinstance(meta, dict):
        return False
    caps = meta.get(CLIENT_CAPABILITIES_META_KEY)
    extensions = caps.get("extensions") if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and TASKS_EXTENSION in extensions


def auth_scope(request: Any, session_name: str) -> str:
    """Who may see a task: over HTTP, the bearer credential that made it (hashed: the
    store never holds a token); over stdio, the server's session (its one client,
    which may restart the server on the same ``--session``)."""
    headers = getattr(request, "headers", None)
    if headers is not None:
        credential = str(headers.get("authorization", ""))
        return "token:" + hashlib.sha256(credential.encode()).hexdigest()
    return "session:" + session_name


def new_task_id(session_name: str) -> tuple[str, str]:
    """A fresh ``(task id, key)``: 128 random bits, then the session the call is in (so
    a server started later, on another session, finds it)."""
    key = secrets.token_hex(16)
    return f"{key}~{session_name}", key


def parse_task_id(task_id: str) -> tuple[str, str]:
    """``(key, session)`` of a task id, or the not-found error."""
    match = _TASK_ID.fullmatch(task_id)
    if match is None:
        raise not_found()
    return match.group(1), match.group(2)


def clip(message: str | None) -> str | None:
    """An upstream's status message, cut to ``MAX_STATUS_CHARS``."""
    if message is None or len(message) <= MAX_STATUS_CHARS:
        return message
    return message[:MAX_STATUS_CHARS] + " [...]"


def missing_extension() -> MCPError:
    """The error for a request that needs the extension and did not declare it."""
    return MCPError(
        types.MISSING_REQUIRED_CLIENT_CAPABILITY,
        "Missing required client capability: declare the "
        f"{TASKS_EXTENSION} extension in the request's client capabilities",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def not_found() -> MCPError:
    return MCPError(types.INVALID_PARAMS, NOT_FOUND)


def task_address(key: str) -> Any:
    return value(TASK_NAMESPACE, key)


def iso(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).isoformat(timespec="milliseconds")


def new_record(*, call_id: str, tool: str, scope: str, settings: TaskSettings) -> dict[str, Any]:
    """The record of a task about to be handed out (working)."""
    now = settings.clock()
    return {
        "call_id": call_id,
        "tool": tool,
        "scope": scope,
        "created": now,
        "updated": now,
        "ttl_ms": settings.ttl_ms,
        "poll_ms": settings.poll_ms,
        "status": "working",
    }


def expired(record: Mapping[str, Any], now: float) -> bool:
    """Whether an ended task is past its TTL (a working one is kept until it ends)."""
    if record.get("status") not in TERMINAL:
        return False
    return now >= float(record["created"]) + int(record["ttl_ms"]) / 1000


def task_fields(task_id: str, record: Mapping[str, Any], message: str | None) -> dict[str, Any]:
    """The ``Task`` fields of ``record``."""
    return {
        "task_id": task_id,
        "status": record["status"],
        "status_message": message if message is not None else record.get("status_message"),
        "created_at": iso(float(record["created"])),
        "last_updated_at": iso(float(record["updated"])),
        "ttl_ms": int(record["ttl_ms"]),
        "poll_interval_ms": int(record["poll_ms"]),
    }


def detailed(task_id: str, record: Mapping[str, Any], message: str | None = None) -> DetailedTask:
    """The ``tasks/get`` answer for ``record``."""
    status = record["status"]
    return DetailedTask(
        **task_fields(task_id, record, message),
        result=record.get("result") if status == "completed" else None,
        error=record.get("error") if status == "failed" else None,
    )


__all__ = [
    "NOT_FOUND",
    "TASKS_EXTENSION",
    "TASK_NAMESPACE",
    "TERMINAL",
    "UPSTREAM_KEY",
    "Ack",
    "CreateTaskResult",
    "DetailedTask",
    "TaskParams",
    "TaskSettings",
    "UpdateParams",
    "auth_scope",
    "clip",
    "detailed",
    "expired",
    "missing_extension",
    "negotiated",
    "new_record",
    "new_task_id",
    "not_found",
    "parse_task_id",
    "task_address",
    "task_fields",
]
