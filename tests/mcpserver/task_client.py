"""The client side of the MCP tasks extension for the tests: the official SDK client on
the 2026-07-28 wire (``server/discover``), declaring ``io.modelcontextprotocol/tasks`` on
each request and claiming ``resultType: "task"`` answers of ``tools/call``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar, Literal

import httpx2
import mcp_types as types
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_helpers import HTTP_TOKEN, stdio_params
from pydantic import ConfigDict, Field

EXT = "io.modelcontextprotocol/tasks"


class TaskHandle(types.Result):
    """A ``CreateTaskResult``."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType", default="task")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(alias="statusMessage", default=None)
    created_at: str = Field(alias="createdAt")
    last_updated_at: str = Field(alias="lastUpdatedAt")
    ttl_ms: int | None = Field(alias="ttlMs")
    poll_interval_ms: int | None = Field(alias="pollIntervalMs", default=None)


class TaskState(types.Result):
    """A ``tasks/get`` answer (a ``DetailedTask``)."""

    model_config = ConfigDict(extra="allow")
    result_type: str = Field(alias="resultType")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(alias="statusMessage", default=None)
    ttl_ms: int | None = Field(alias="ttlMs")
    poll_interval_ms: int | None = Field(alias="pollIntervalMs", default=None)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(alias="inputRequests", default=None)


class Ack(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: str = Field(alias="resultType")


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class TaskRequest(types.Request[TaskIdParams, str]):
    name_param: ClassVar[str | None] = "taskId"


class UpdateIdParams(TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses")


class UpdateRequest(types.Request[UpdateIdParams, str]):
    name_param: ClassVar[str | None] = "taskId"


async def _unresolved(handle: TaskHandle, ctx: ClaimContext) -> types.CallToolResult:
    raise AssertionError("the tests poll tasks themselves (allow_claimed=True)")


def task_session(read: Any, write: Any) -> ClientSession:
    """An SDK client session that declares the tasks extension."""
    claim = ResultClaim(result_type="task", model=TaskHandle, resolve=_unresolved)
    return ClientSession(read, write, extensions={EXT: {}}, result_claims={EXT: [claim]})


async def call(client: ClientSession, tool: str, args: dict[str, Any]) -> Any:
    """``tools/call``: a ``TaskHandle`` or a ``CallToolResult``."""
    return await client.call_tool(tool, args, allow_claimed=True)


async def get(client: ClientSession, task_id: str) -> TaskState:
    request = TaskRequest(method="tasks/get", params=TaskIdParams(taskId=task_id))
    return await client.send_request(request, TaskState)


async def update(client: ClientSession, task_id: str, responses: dict[str, Any]) -> Ack:
    params = UpdateIdParams(taskId=task_id, inputResponses=responses)
    return await client.send_request(UpdateRequest(method="tasks/update", params=params), Ack)


async def cancel(client: ClientSession, task_id: str) -> Ack:
    request = TaskRequest(method="tasks/cancel", params=TaskIdParams(taskId=task_id))
    return await client.send_request(request, Ack)


@contextlib.asynccontextmanager
async def tasks_over_stdio(
    tmp_path: Path, *args: str, session: str = "s1"
) -> AsyncIterator[ClientSession]:
    """A discovered (2026-07-28) tasks client on a new ``toolfold mcp`` (stdio)."""
    with open(tmp_path / f"server-{session}.err", "a") as errlog:
        async with (
            stdio_client(stdio_params(tmp_path, *args, session=session), errlog=errlog) as (r, w),
            task_session(r, w) as client,
        ):
            await client.discover()
            yield client


@contextlib.asynccontextmanager
async def tasks_over_http(url: str, token: str = HTTP_TOKEN) -> AsyncIterator[ClientSession]:
    """A discovered (2026-07-28) tasks client on a ``toolfold mcp --http`` server."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        streamable_http_client(url, http_client=http) as (r, w),
        task_session(r, w) as client,
    ):
        await client.discover()
        yield client
