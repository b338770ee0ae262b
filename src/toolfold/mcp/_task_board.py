"""``TaskBoard``: the tasks of one ``toolfold mcp`` server, kept in its store.

A call that became a task runs like any other call (recorded before it starts,
checkpointed, settled); the board adds its task record beside it and answers
``tasks/get``, ``tasks/update`` and ``tasks/cancel``:

- while the call runs in this process, ``tasks/get`` reads its live window (lines and
  bytes so far, the last line);
- once it ended, the record holds the ``CallToolResult`` it ended with;
- a task whose call ran in a server that is gone (``kill -9``, a crash) is finished
  from the store by the rules of ``toolfold resume``: a replay-safe tool is re-run,
  seeded with its checkpoint, any other is settled as interrupted with the output it
  had; a call still running in another live process is shown from its checkpoint;
- an ended task past its TTL is removed with its spill file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import MCP_NAME_HEADER

from toolfold.execenv import LocalExecEnv
from toolfold.harness import Harness, Tool, ToolContext, ToolResult
from toolfold.history import (
    lookup_call,
    pending_output,
    process_alive,
    run_record_address,
    settled_record,
)
from toolfold.output import ToolOutput, ToolOutputState, output_text
from toolfold.storage import Repository, Session, StorageError, delete_value, set_value

from ._progress import status_line
from ._protocol_errors import protocol_error
from ._results import call_tool_result
from ._tasks import (
    TASK_NAMESPACE,
    TERMINAL,
    UPSTREAM_KEY,
    Ack,
    CreateTaskResult,
    DetailedTask,
    TaskParams,
    TaskSettings,
    UpdateParams,
    auth_scope,
    clip,
    detailed,
    expired,
    missing_extension,
    negotiated,
    new_record,
    new_task_id,
    not_found,
    parse_task_id,
    task_address,
    task_fields,
)


class TaskHost(Protocol):
    """What the board needs of the server it serves."""

    session: Session

    @property
    def session_name(self) -> str:
        """The session this server records its calls in."""

    @property
    def spill_root(self) -> Path:
        """The directory of every session's spill directory."""

    @property
    def tools(self) -> list[Tool[Any]]:
        """The tools served."""

    @property
    def cwd(self) -> Path:
        """Where commands run."""

    def exec_env_for(self, spill_dir: Path) -> LocalExecEnv:
        """An exec env spilling into ``spill_dir``, confined as this server's own."""

    def result_for(self, tool: Tool[Any], result: ToolResult, call_id: str) -> types.CallToolResult:
        """The MCP result of a settled call."""

    def tool_named(self, name: str) -> Tool[Any] | None:
        """The tool named ``name`` (``None``: not served here)."""

    def live_sink(self, call_id: str) -> ToolOutput | None:
        """The output of a call running in this process (``None``: not running here)."""

    def cancel_call(self, call_id: str) -> bool:
        """Ask a call running here to stop; whether it runs here."""

    async def wait_call(self, call_id: str) -> None:
        """Wait until a call running here has settled (at once if it does not run here)."""

    def pending_input(self, call_id: str) -> dict[str, Any]:
        """The input requests a call running here waits on (empty: none)."""

    def give_input(self, call_id: str, responses: dict[str, Any]) -> None:
        """Pass the client's answers to a call running here."""


class Relay(Protocol):
    """Where the tasks an upstream runs for the proxy's calls are asked about."""

    async def status(self, call_id: str) -> Any | None:
        """The upstream's task now (``status``, ``status_message``, ``input_requests``),
        or ``None`` once it ended."""

    async def update(self, call_id: str, responses: dict[str, Any]) -> None:
        """Pass the client's input responses on."""


@dataclass
class _Found:
    session: Session
    key: str
    record: dict[str, Any]


def _dump(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


class TaskBoard:
    """The tasks of one server (see the module docstring)."""

    def __init__(
        self, host: TaskHost, settings: TaskSettings, repository: Repository | None = None
    ) -> None:
        self.host = host
        self.settings = settings
        self._repository = repository
        self._lock = asyncio.Lock()
        self._live: dict[str, str] = {}  # call id -> task key, for calls running here
        self._expected: set[str] = set()
        self._ended: dict[str, tuple[ToolResult | None, BaseException | None]] = {}
        self._cancelled: set[str] = set()
        self._others: dict[str, Session] = {}
        self._resuming: dict[str, asyncio.Task[None]] = {}
        self._rerun_cancels: dict[str, asyncio.Event] = {}  # call id -> its cancel event
        self.relay: Relay | None = None
        """Set by the proxy when it passes an upstream's own tasks through."""

    # -- the MCP surface ---------------------------------------------------------------

    def methods(self) -> list[tuple[str, type[TaskParams], Callable[..., Awaitable[Any]]]]:
        """The extension's request methods and their handlers."""
        return [
            ("tasks/get", TaskParams, self.get),
            ("tasks/update", UpdateParams, self.update),
            ("tasks/cancel", TaskParams, self.cancel),
        ]

    async def get(self, ctx: ServerRequestContext[Any], params: TaskParams) -> DetailedTask:
        found = await self._find(ctx, params.task_id)
        return await self._answer(params.task_id, found)

    async def update(self, ctx: ServerRequestContext[Any], params: UpdateParams) -> Ack:
        # The answers go to the tool that asked (ask_client), or to the upstream's task
        # (the proxy); answers nothing waits for are ignored, as the SEP says.
        found = await self._find(ctx, params.task_id)
        record = found.record
        if record["status"] in TERMINAL:
            return Ack()
        call_id = str(record["call_id"])
        if self.relay is not None and UPSTREAM_KEY in record:
            await self.relay.update(call_id, params.input_responses)
        else:
            self.host.give_input(call_id, params.input_responses)
        return Ack()

    async def cancel(self, ctx: ServerRequestContext[Any], params: TaskParams) -> Ack:
        found = await self._find(ctx, params.task_id)
        if found.record["status"] in TERMINAL:
            return Ack()  # it ended first: nothing to do, and saying so again is harmless
        call_id = str(found.record["call_id"])
        # Cancelling is cooperative: a call running in another live process is left to
        # it (its status stays working until it ends there).
        if self.host.cancel_call(call_id):
            self._cancelled.add(call_id)
        elif call_id in self._rerun_cancels or any(not t.done() for t in self._resuming.values()):
            # Re-run here for a server that stopped (or about to be: the re-run takes
            # the event already set).
            self._rerun_cancels.setdefault(call_id, asyncio.Event()).set()
            self._cancelled.add(call_id)
        return Ack()

    # -- a call's life -----------------------------------------------------------------

    def expect(self, call_id: str) -> None:
        """``call_id`` may become a task: keep how it ends until :meth:`forget`."""
        self._expected.add(call_id)

    def is_task(self, call_id: str) -> bool:
        """Whether ``call_id`` was handed out as a task."""
        return call_id in self._live or call_id not in self._expected

    def forget(self, call_id: str) -> None:
        """``call_id`` was answered without a task."""
        self._expected.discard(call_id)
        self._ended.pop(call_id, None)

    async def create(
        self, call_id: str, tool: str, scope: str, upstream: Any | None = None
    ) -> CreateTaskResult:
        """Commit the task of a running call and return its handle (``upstream``: the
        handle of the upstream's own task the call follows, for the proxy)."""
        await self.sweep()
        task_id, key = new_task_id(self.host.session_name)
        record = new_record(call_id=call_id, tool=tool, scope=scope, settings=self.settings)
        if upstream is not None:
            record[UPSTREAM_KEY] = upstream.task_id
        async with self._lock:
            self._expected.discard(call_id)
            ended = self._ended.pop(call_id, None)
            if ended is None:
                self._live[call_id] = key
            else:
                self._finish(record, *ended)
            await self.host.session.commit([set_value(task_address(key), record)])
        if upstream is not None and record["status"] not in TERMINAL:
            fields = task_fields(task_id, record, clip(upstream.status_message))
            return CreateTaskResult(**{**fields, "status": upstream.status})
        sink = self.host.live_sink(call_id)
        return CreateTaskResult(**task_fields(task_id, record, self._live_message(sink)))

    async def ended(
        self, call_id: str, result: ToolResult | None, error: BaseException | None = None
    ) -> None:
        """The call ``call_id`` settled with ``result`` (or failed outside its tool)."""
        async with self._lock:
            key = self._live.pop(call_id, None)
            if key is None:
                if call_id in self._expected:
                    self._ended[call_id] = (result, error)
                return
            session = self.host.session
            record = await session.get_value(task_address(key))
            if isinstance(record, dict):
                self._finish(record, result, error)
                await session.commit([set_value(task_address(key), record)])
            self._cancelled.discard(call_id)

    def _finish(
        self, record: dict[str, Any], result: ToolResult | None, error: BaseException | None
    ) -> None:
        record["updated"] = self.settings.clock()
        call_id = str(record["call_id"])
        if result is None:
            record["status"] = "failed"
            record["error"] = {"code": types.INTERNAL_ERROR, "message": f"call failed: {error!r}"}
            return
        failure = protocol_error(result)
        if failure is not None and call_id not in self._cancelled:
            # The tool failed the request (ProtocolError): failed, with that error and
            # no result (the call's output stays in the store, under its call id).
            record["status"] = "failed"
            record["error"] = failure
            return
        tool = self.host.tool_named(str(record["tool"]))
        if tool is not None:
            mcp_result = self.host.result_for(tool, result, call_id)
        else:
            mcp_result = call_tool_result(
                result, retain="tail", call_id=call_id, session=self.host.session_name, reader=None
            )
        record["result"] = _dump(mcp_result)
        if result.outcome == "cancelled" or call_id in self._cancelled:
            record["status"] = "cancelled" if result.outcome == "cancelled" else "completed"
            record["status_message"] = (
                "Cancelled; the partial output is kept in call "
                f"{call_id} (toolfold show {self.host.session_name} {call_id})"
            )
        else:
            record["status"] = "completed"

    # -- finding and answering -----------------------------------------------------------

    async def _find(self, ctx: ServerRequestContext[Any], task_id: str) -> _Found:
        if not negotiated(ctx.protocol_version, ctx.meta):
            raise missing_extension()
        headers = getattr(ctx.request, "headers", None)
        if headers is not None and headers.get(MCP_NAME_HEADER, task_id) != task_id:
            # Intermediaries route tasks/* by this header (SEP-2243): it must agree.
            raise MCPError(
                types.HEADER_MISMATCH,
                f"the {MCP_NAME_HEADER} header does not match params.taskId; send the task id in both",
            )
        key, session_name = parse_task_id(task_id)
        session = await self._session(session_name)
        record = None if session is None else await session.get_value(task_address(key))
        scope = auth_scope(ctx.request, self.host.session_name)
        if session is None or not isinstance(record, dict) or record.get("scope") != scope:
            raise not_found()
        if expired(record, self.settings.clock()):
            await self._expire(session, key, record)
            raise not_found()
        return _Found(session, key, record)

    async def _answer(self, task_id: str, found: _Found) -> DetailedTask:
        record = found.record
        if record["status"] in TERMINAL:
            return detailed(task_id, record)
        call_id = str(record["call_id"])
        sink = self.host.live_sink(call_id)
        if self.relay is not None and UPSTREAM_KEY in record and call_id in self._live:
            return await self._relayed(task_id, found)
        if sink is not None or call_id in self._live:
            answer = detailed(task_id, record, self._live_message(sink))
            pending = self.host.pending_input(call_id)
            if pending:
                return answer.model_copy(
                    update={"status": "input_required", "input_requests": pending}
                )
            return answer
        # Not running here: it ran in a server that stopped (or runs in another).
        return detailed(task_id, record, await self._settle_elsewhere(found))

    async def _relayed(self, task_id: str, found: _Found) -> DetailedTask:
        # The upstream runs the task: its status, message and input requests now.
        assert self.relay is not None
        call_id = str(found.record["call_id"])
        state = await self.relay.status(call_id)
        if state is not None:
            answer = detailed(task_id, found.record, state.status_message)
            return answer.model_copy(
                update={"status": state.status, "input_requests": state.input_requests}
            )
        # It ended upstream: the call adopts the result (bounded, recorded) at once.
        await self.host.wait_call(call_id)
        record = await found.session.get_value(task_address(found.key))
        if not isinstance(record, dict):
            raise not_found()
        return detailed(task_id, record, None if record["status"] in TERMINAL else "finishing")

    @staticmethod
    def _live_message(sink: ToolOutput | None) -> str:
        if sink is None:
            return "starting"
        t = sink.truncation
        return status_line(int(t["total_lines"]), int(t["total_bytes"]), sink.text)

    async def _settle_elsewhere(self, found: _Found) -> str:
        session, record = found.session, found.record
        call_id = str(record["call_id"])
        calls = [c for c in await lookup_call(session, call_id) if c.tool_call_id == call_id]
        if not calls:
            record.update(
                status="failed",
                updated=self.settings.clock(),
                error={
                    "code": types.INTERNAL_ERROR,
                    "message": f"call {call_id} is not in the store",
                },
            )
            await session.commit([set_value(task_address(found.key), record)])
            return "failed"
        call = calls[0]
        if call.settled and isinstance(call.message, dict):
            message = call.message
            run = call.record if isinstance(call.record, dict) else {}
            result = ToolResult(
                tool_call_id=call_id,
                tool_name=call.tool_name,
                content=list(message.get("content") or []),
                details=dict(message.get("details") or {}),
                is_error=bool(message.get("is_error")),
                outcome=message.get("outcome") or ("error" if message.get("is_error") else "ok"),
                state=cast(
                    ToolOutputState,
                    {
                        "content": list(message.get("content") or []),
                        "truncation": run.get("truncation"),
                        "spill_path": run.get("spill_path"),
                    },
                ),
            )
            self._finish(record, result, None)
            await session.commit([set_value(task_address(found.key), record)])
            return str(record.get("status_message") or record["status"])
        state = await pending_output(session, call)
        text = output_text(state)
        totals = state.get("truncation") if isinstance(state, dict) else None
        where = status_line(
            int((totals or {}).get("total_lines", 0)),
            int((totals or {}).get("total_bytes", 0)),
            text,
        )
        if process_alive(call.record) and call.record.get("pid") != os.getpid():
            return f"{where} (running in process {call.record.get('pid')})"
        name = next(
            n
            for n, s in [(self.host.session_name, self.host.session), *self._others.items()]
            if s is session
        )
        self.finish_later(name, session)
        return f"{where} (the server that ran it stopped; finishing it from the store)"

    def finish_later(self, name: str, session: Session) -> None:
        """Finish a stopped server's calls in session ``name`` in the background (once
        at a time per session), while this server answers: a replay-safe task re-run
        from the start may take as long as it took the first time."""
        if name not in self._resuming or self._resuming[name].done():
            self._resuming[name] = asyncio.create_task(self._resume(name, session))

    async def _resume(self, name: str, session: Session) -> None:
        """Finish a stopped server's calls by ``toolfold resume``'s rules."""
        env = self.host.exec_env_for(self.host.spill_root / name)
        harness = Harness(
            self.host.tools, context=ToolContext(env=env, cwd=self.host.cwd), session=session
        )
        # Each task's call gets a cancel event, so tasks/cancel reaches a re-run too.
        for _, record in await session.scan_values(TASK_NAMESPACE):
            if isinstance(record, dict) and record.get("status") not in TERMINAL:
                self._rerun_cancels.setdefault(str(record.get("call_id")), asyncio.Event())
        for result in await harness.resume(cancels=self._rerun_cancels):
            if result.state is not None:
                record = await session.get_value(run_record_address(result.tool_call_id))
                if isinstance(record, dict):
                    await session.commit(
                        [settled_record(result.tool_call_id, record, result.state)]
                    )

    async def _session(self, name: str) -> Session | None:
        if name == self.host.session_name:
            return self.host.session
        if name in self._others:
            return self._others[name]
        if self._repository is None:
            return None
        try:
            session = await self._repository.open_session(name)
        except StorageError:
            # Missing, or held by another live process (a JSONL store's lock): either
            # way not a task this server can answer for.
            return None
        self._others[name] = session
        return session

    # -- expiry --------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Remove this session's ended tasks past their TTL; how many went."""
        now = self.settings.clock()
        gone = 0
        for key, record in await self.host.session.scan_values(TASK_NAMESPACE):
            if isinstance(record, dict) and expired(record, now):
                await self._expire(self.host.session, key, record)
                gone += 1
        return gone

    async def _expire(self, session: Session, key: str, record: dict[str, Any]) -> None:
        run = await session.get_value(run_record_address(str(record["call_id"])))
        spill = run.get("spill_path") if isinstance(run, dict) else None
        await session.commit([delete_value(task_address(key))])
        if isinstance(spill, str):
            self._remove_spill(Path(spill))

    def _remove_spill(self, path: Path) -> None:
        # Only a regular file of ours under the spill root, never through a symlink:
        # the path comes from the store, which another process may have written.
        root = os.path.realpath(self.host.spill_root)
        with contextlib.suppress(OSError):
            if os.path.realpath(path.parent).startswith(root + os.sep):
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid():
                    os.unlink(path)

    async def aclose(self) -> None:
        """Wait for resumes in flight; close the other sessions opened."""
        pending = [t for t in self._resuming.values() if not t.done()]
        if pending:
            await asyncio.wait(pending)
        for session in self._others.values():
            await session.close()
        self._others.clear()


__all__ = ["TaskBoard", "TaskHost"]
