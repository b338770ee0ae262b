"""``TaskRelay``: an upstream's own tasks, passed through the proxy (``--tasks upstream``).

The proxy speaks 2026-07-28 to an upstream that knows it and declares the tasks
extension on its requests. When the upstream answers a ``tools/call`` with a task:

- the proxy's call (one durable harness run, as for any proxied call) follows it,
  polling ``tasks/get`` at the interval the upstream suggests (bounded), until it ends;
- if the proxy's own client negotiated tasks, it gets a task of the proxy's at once
  (scoped, durable, recorded like any other), whose ``tasks/get`` asks the upstream
  and passes its status, status message and input requests on; ``tasks/update`` goes
  to the upstream's task; ``tasks/cancel`` cancels the call, which cancels the
  upstream's task;
- the upstream's final result goes through the proxy's window like any proxied
  result: the client gets it bounded, and the store records it.

A client that did not negotiate tasks gets the result in full once the upstream's
task ended, as if the upstream had answered at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import mcp_types as types
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, Field, ValidationError

from toolfold.harness import ToolError

from ._tasks import TASKS_EXTENSION, TERMINAL, clip
from ._upstream import Upstream, UpstreamError

MIN_POLL = 0.05
MAX_POLL = 10.0
"""Bounds of the interval the proxy polls an upstream's task at, whatever it suggests."""

CANCEL_WAIT = 5.0
"""Seconds a ``tasks/cancel`` to the upstream may take when the call is cancelled."""


class _TaskFields(types.Result):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    task_id: str = Field(alias="taskId", max_length=256)
    status: Literal["working", "input_required", "completed", "failed", "cancelled"]
    status_message: str | None = Field(alias="statusMessage", default=None)
    poll_interval_ms: int | None = Field(alias="pollIntervalMs", default=None)


class UpstreamHandle(_TaskFields):
    """An upstream's ``CreateTaskResult`` (what a ``tools/call`` may be answered with)."""

    result_type: Literal["task"] = Field(alias="resultType", default="task")


class UpstreamTask(_TaskFields):
    """An upstream's ``DetailedTask`` (a ``tasks/get`` answer)."""

    result_type: str = Field(alias="resultType", default="complete")
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(alias="inputRequests", default=None)


class _TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class _UpdateParams(_TaskIdParams):
    input_responses: dict[str, Any] = Field(alias="inputResponses", default_factory=dict)


class _TaskRequest(types.Request[_TaskIdParams, str]):
    # Over HTTP the SDK mirrors params.taskId into the Mcp-Name header (SEP-2243).
    name_param: ClassVar[str | None] = "taskId"


class _UpdateRequest(types.Request[_UpdateParams, str]):
    name_param: ClassVar[str | None] = "taskId"


class _Ack(types.Result):
    model_config = ConfigDict(extra="allow")


async def _never(handle: UpstreamHandle, ctx: ClaimContext) -> types.CallToolResult:
    raise AssertionError("the proxy follows an upstream's tasks itself (allow_claimed=True)")


def client_options() -> dict[str, Any]:
    """``ClientSession`` arguments that declare the tasks extension to the upstream and
    accept its ``resultType: "task"`` answers."""
    claim = ResultClaim(result_type="task", model=UpstreamHandle, resolve=_never)
    return {"extensions": {TASKS_EXTENSION: {}}, "result_claims": {TASKS_EXTENSION: [claim]}}


def offers_tasks(session: ClientSession) -> bool:
    """Whether the upstream negotiated 2026-07-28 and advertises the tasks extension."""
    caps = session.server_capabilities
    return (
        session.protocol_version in MODERN_PROTOCOL_VERSIONS
        and caps is not None
        and caps.extensions is not None
        and TASKS_EXTENSION in caps.extensions
    )


@dataclass
class _Following:
    task_id: str
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    final: UpstreamTask | None = None


class TaskRelay:
    """The upstream's tasks of the proxy's calls (see the module docstring)."""

    def __init__(self, upstream: Upstream, max_input_bytes: int) -> None:
        self.upstream = upstream
        self.max_input_bytes = max_input_bytes
        self._handoffs: dict[str, asyncio.Future[UpstreamHandle | None]] = {}
        self._following: dict[str, _Following] = {}

    def handoff(self, call_id: str) -> asyncio.Future[UpstreamHandle | None]:
        """What the proxy's dispatcher waits on for ``call_id``: the upstream's task
        handle once it answered with one, ``None`` if it will not (no extension)."""
        future: asyncio.Future[UpstreamHandle | None] = asyncio.get_running_loop().create_future()
        self._handoffs[call_id] = future
        # Dropped once settled or abandoned (a call whose tool never ran).
        future.add_done_callback(lambda _: self._handoffs.pop(call_id, None))
        return future

    async def call(
        self, call_id: str, name: str, args: dict[str, Any], progress: Any
    ) -> types.CallToolResult:
        """``tools/call`` on the upstream; a task it answers with is followed to its end."""
        handoff = self._handoffs.pop(call_id, None)
        try:
            session = await self.upstream.session()
            if not offers_tasks(session) and handoff is not None and not handoff.done():
                handoff.set_result(None)  # the proxy's own task delay applies
            answer = await self.upstream.call(
                lambda s: s.call_tool(
                    name,
                    args,
                    progress_callback=progress,
                    allow_claimed=True,
                    allow_input_required=True,
                )
            )
            if isinstance(answer, types.CallToolResult):
                return answer
            if not isinstance(answer, UpstreamHandle):
                raise ToolError(
                    f"the {self.upstream.spec.describe()} answered {name!r} asking for input "
                    "outside a task (a multi round-trip request), which the proxy does not "
                    "pass on; call it through a client that negotiates tasks"
                )
            if handoff is not None and not handoff.done():
                handoff.set_result(answer)
            return await self._follow(call_id, answer)
        finally:
            if handoff is not None and not handoff.done():
                handoff.set_result(None)

    async def _follow(self, call_id: str, handle: UpstreamHandle) -> types.CallToolResult:
        following = _Following(handle.task_id)
        state = UpstreamTask.model_validate(handle.model_dump(by_alias=True))
        self._following[call_id] = following
        try:
            while state.status not in TERMINAL:
                poll = (state.poll_interval_ms or 1000) / 1000
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        following.wake.wait(), min(max(poll, MIN_POLL), MAX_POLL)
                    )
                following.wake.clear()
                state = following.final or await self._get(state.task_id)
        except asyncio.CancelledError:
            # The proxy's call was cancelled (its client's tasks/cancel or cancel
            # notification): the upstream's task is cancelled too, within a bound.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    asyncio.shield(self._send(state.task_id, "tasks/cancel")), CANCEL_WAIT
                )
            raise
        finally:
            self._following.pop(call_id, None)
        return self._ended(state)

    def _ended(self, state: UpstreamTask) -> types.CallToolResult:
        who = self.upstream.spec.describe()
        if state.status == "failed":
            error = state.error or {}
            raise ToolError(
                f"the {who}'s task {state.task_id} failed: error {error.get('code')}: "
                f"{clip(str(error.get('message', '')))}"
            )
        if state.result is None:
            raise ToolError(f"the {who}'s task {state.task_id} ended {state.status} with no result")
        try:
            return types.CallToolResult.model_validate(state.result)
        except ValidationError as exc:
            raise ToolError(
                f"the {who}'s task {state.task_id} ended with a result that is not a "
                f"CallToolResult: {exc.errors()[0]['msg']}"
            ) from exc

    async def _send(self, task_id: str, method: str) -> _Ack:
        request = _TaskRequest(method=method, params=_TaskIdParams(taskId=task_id))
        return await self.upstream.call(lambda s: s.send_request(request, _Ack))

    async def _get(self, task_id: str) -> UpstreamTask:
        request = _TaskRequest(method="tasks/get", params=_TaskIdParams(taskId=task_id))
        state = await self.upstream.call(lambda s: s.send_request(request, UpstreamTask))
        if state.input_requests is not None:
            size = len(json.dumps(state.input_requests))
            if size > self.max_input_bytes:
                # The client could not be shown them within the window: the task
                # cannot go on through the proxy.
                with contextlib.suppress(Exception):
                    await self._send(task_id, "tasks/cancel")
                return state.model_copy(
                    update={
                        "status": "failed",
                        "input_requests": None,
                        "error": {
                            "code": types.INTERNAL_ERROR,
                            "message": f"it asked for input in {size:,} bytes of requests, "
                            f"over the proxy's window of {self.max_input_bytes:,} bytes",
                        },
                    }
                )
        return state

    # -- what the task board asks of a task the upstream runs -----------------------------

    async def status(self, call_id: str) -> UpstreamTask | None:
        """The upstream's task of ``call_id`` now, or ``None`` once it ended (the
        call then finishes with its result)."""
        following = self._following.get(call_id)
        if following is None:
            return None
        state: UpstreamTask = await self._relayed(lambda: self._get(following.task_id))
        if state.status in TERMINAL:
            following.final = state
            following.wake.set()
            return None
        return state.model_copy(update={"status_message": clip(state.status_message)})

    async def update(self, call_id: str, responses: dict[str, Any]) -> None:
        """Pass the client's input responses to the upstream's task of ``call_id``."""
        following = self._following.get(call_id)
        if following is None:
            return  # it ended: the SEP has a late update ignored
        request = _UpdateRequest(
            method="tasks/update",
            params=_UpdateParams(taskId=following.task_id, inputResponses=responses),
        )
        await self._relayed(lambda: self.upstream.call(lambda s: s.send_request(request, _Ack)))
        following.wake.set()  # its status is likely to change: look again now

    async def _relayed(self, fn: Callable[[], Any]) -> Any:
        try:
            return await fn()
        except UpstreamError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from exc
        except MCPError as exc:
            raise MCPError(
                exc.code, f"the {self.upstream.spec.describe()} answered: {exc.message}"
            ) from exc


__all__ = ["TaskRelay", "UpstreamHandle", "UpstreamTask", "client_options", "offers_tasks"]
