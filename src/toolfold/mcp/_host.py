"""``McpHost``: toolfold tools behind the MCP SDK's low-level ``Server``.

Every ``tools/call`` is one durable harness run in the host's storage session: the
call is recorded before the tool starts, checkpointed while it runs and settled
with its bounded result, so ``toolfold show`` lists it and ``toolfold serve`` shows
it. Each call runs in its own task, apart from the SDK's handler: a client's
``notifications/cancelled`` (which interrupts the handler) becomes the tool's
``cancel`` event, so the call settles as *cancelled* with its partial output kept
instead of being torn down mid-write.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import sys
import uuid
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from time import monotonic
from typing import Any, Protocol

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPError

from toolfold._fsperm import UnsafePathError, make_private_dirs, open_owned_dir
from toolfold.durability import default_host_id
from toolfold.execenv import LocalExecEnv, Sandbox, stop_orphans
from toolfold.harness import (
    Durability,
    Harness,
    Pacing,
    Tool,
    ToolCall,
    ToolContext,
    ToolResult,
    background_settled,
    orphan_notes,
)
from toolfold.history import (
    list_calls,
    mark_activity,
    new_run_record,
    process_alive,
    run_record_address,
    settled_record,
)
from toolfold.output import ToolOutput
from toolfold.storage import Repository, Session, set_value

from ._errors import McpHostError
from ._input import CallInputs, bind
from ._progress import McpHooks, ProgressReporter, progress_token
from ._protocol_errors import answering_protocol_errors, protocol_error
from ._results import call_tool_result
from ._task_board import TaskBoard
from ._tasks import (
    TASK_NAMESPACE,
    TASKS_EXTENSION,
    CreateTaskResult,
    TaskSettings,
    auth_scope,
    missing_extension,
    negotiated,
)
from ._telemetry import RequestTelemetry
from ._tools import OUTPUT_SCHEMA, READ_TOOL, SIZE_HINT_KEY, describe, input_schema, size_hint

FIRST = asyncio.FIRST_COMPLETED

SHUTDOWN_GRACE = 10.0
"""Seconds calls still running when the client goes away get to settle as cancelled."""

ACTIVITY_MARK_INTERVAL = 1.0
"""Seconds between two marks of the session's activity (its spill directory's time,
which the viewer's landing page orders sessions by): a call starting sooner after the
last mark leaves it as it is."""

INSTRUCTIONS = (
    "toolfold tools: every result is bounded to a window, and a command's full output "
    "is kept in a spill file that `read` pages through. Every call is recorded durably."
)


def package_version() -> str:
    """toolfold's installed version (what the server reports as its version)."""
    try:
        return version("toolfold")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


@dataclass
class McpSettings:
    """What one MCP server serves and where it records it."""

    session_name: str
    spill_dir: Path
    tools: list[Tool[Any]]
    cwd: Path = field(default_factory=Path.cwd)
    pacing: Pacing = field(default_factory=Pacing)
    tasks: TaskSettings = field(default_factory=TaskSettings)
    sandbox: Sandbox | None = None
    """Confines the commands of the tools (``bash``, ``pytest``) and the files ``read``
    and ``grep`` may open; the built-in tools' descriptions say which profile."""


class Stoppable(Protocol):
    """A progress reporter the handler can silence when the client cancels."""

    def stop(self) -> None:
        """Send nothing more."""


@dataclass
class _Call:
    cancel: asyncio.Event
    task: asyncio.Task[ToolResult]


def _summary(name: str, args: Any) -> str:
    # What `toolfold show` prints for the call: a bash command as typed, else the
    # tool and its arguments.
    if name == "bash" and isinstance(args, dict) and isinstance(args.get("command"), str):
        return str(args["command"])
    return f"{name} {json.dumps(args, ensure_ascii=False, sort_keys=True)}"


class McpHost:
    """The tools of ``settings`` served over MCP, recorded in ``session``."""

    spill_dir_at_start = True
    """Make the session's spill directory at start (the proxy makes it on first use:
    one there already is judged at start either way)."""

    def __init__(
        self, session: Session, settings: McpSettings, repository: Repository | None = None
    ) -> None:
        self.session = session
        self.settings = settings
        self._reporters: dict[str, ProgressReporter] = {}
        # Spill files hold command output: the directories are made (0700) and judged
        # here by the one rule for what toolfold writes (never a planted link, never
        # another user's), before the proxy writes its own spill files into them.
        spill = settings.spill_dir.absolute()
        try:
            if self.spill_dir_at_start or os.path.lexists(spill):
                os.close(open_owned_dir(spill))  # as the exec env makes it
            else:
                make_private_dirs(spill.parent.parent)
        except OSError as exc:
            raise McpHostError(
                f"cannot use the spill directory {spill}: {exc}"
                if not isinstance(exc, UnsafePathError)
                else str(exc)
            ) from exc
        env = LocalExecEnv(settings.spill_dir, sandbox=settings.sandbox)
        self._env = env
        self._context = ToolContext(env=env, cwd=settings.cwd)
        self._hooks = McpHooks(Durability(session, host=default_host_id()), self._reporters)
        # A tool's ProtocolError is noted in its call's details (the harness settles it
        # as an error like any other; only this layer knows it fails the request).
        self._served = [answering_protocol_errors(t) for t in settings.tools]
        self.harness = Harness(
            self._served,
            context=self._context,
            # Each call is leased as this process (``hostname:pid``, renewed while it
            # runs), so a janitor (``toolfold serve --resume-orphans``) settles the calls
            # of a server that died, and leaves a live one's alone.
            hooks=self._hooks,
            pacing=settings.pacing,
        )
        self.reader: str | None = READ_TOOL if READ_TOOL in self.harness.tools else None
        self._calls: dict[str, _Call] = {}
        self._inputs: dict[str, CallInputs] = {}
        self._marked_at = -ACTIVITY_MARK_INTERVAL  # monotonic time of the last mark
        self.tasks = TaskBoard(self, settings.tasks, repository)

    # -- what the task board reads ---------------------------------------------------

    @property
    def session_name(self) -> str:
        """The storage session calls are recorded in."""
        return self.settings.session_name

    @property
    def spill_root(self) -> Path:
        """The directory holding every session's spill directory."""
        return self.settings.spill_dir.parent

    @property
    def tools(self) -> list[Tool[Any]]:
        """The tools served (as run: a ``ProtocolError`` noted in the call's details)."""
        return self._served

    @property
    def cwd(self) -> Path:
        """Where commands run."""
        return self.settings.cwd

    def exec_env_for(self, spill_dir: Path) -> LocalExecEnv:
        """An exec env spilling into ``spill_dir``, confined as this server's own (the
        server's own session uses the server's env)."""
        if spill_dir == self.settings.spill_dir:
            return self._env
        return LocalExecEnv(spill_dir, sandbox=self.settings.sandbox)

    def tool_named(self, name: str) -> Tool[Any] | None:
        """A tool a call of this server ran (an upstream's stand-in too, for the proxy)."""
        return self.harness.tools.get(name)

    def live_sink(self, call_id: str) -> ToolOutput | None:
        """The output of a call running in this process, if it runs here."""
        return self._hooks.sinks.get(call_id)

    def cancel_call(self, call_id: str) -> bool:
        """Set the cancel event of a call running here; whether it runs here."""
        call = self._calls.get(call_id)
        if call is not None:
            call.cancel.set()
        return call is not None

    def pending_input(self, call_id: str) -> dict[str, Any]:
        """The input requests a call running here waits on (``ask_client``)."""
        inputs = self._inputs.get(call_id)
        return inputs.pending if inputs is not None else {}

    def give_input(self, call_id: str, responses: dict[str, Any]) -> None:
        """The client's answers to a call running here."""
        inputs = self._inputs.get(call_id)
        if inputs is not None:
            inputs.answer(responses)

    async def wait_call(self, call_id: str) -> None:
        """Wait until a call running here has settled (at once if it does not run here)."""
        call = self._calls.get(call_id)
        if call is not None:
            await asyncio.wait({call.task})

    def task_handoff(self, tool: Tool[Any], call_id: str) -> asyncio.Future[Any] | None:
        """For a call that may become a task: a future that an upstream's own task
        handle resolves (the proxy), ``None`` when the call's task is the server's own
        choice (its delay). Resolved with ``None``: the delay applies after all."""
        return None

    # -- start-up --------------------------------------------------------------------

    async def recover(self) -> list[ToolResult]:
        """Settle the calls an earlier server left unsettled in this session (it
        crashed or was killed) as *interrupted*, with their last checkpointed output.

        Nothing is re-run, not even replay-safe tools: the client that asked is gone;
        unless a call became a task, whose client polls for it: then the session's calls
        are finished by ``toolfold resume``'s rules in the background, while the server
        answers, and nothing is returned here.
        A call whose server process still runs is left alone (and so is the rest,
        since resume works per session): two servers may share a session."""
        # Background commands an earlier server left running when it died are stopped;
        # the calls recording their output say so when they are settled below.
        orphans = stop_orphans(self.settings.spill_dir)
        for orphan in orphans:
            print(
                f"toolfold mcp: background command {orphan.handle} ({orphan.command[:80]!r}) "
                f"of a server that died (pid {orphan.owner_pid}): "
                + (
                    f"stopped pid {', '.join(map(str, orphan.killed))}"
                    if orphan.killed
                    else "had ended"
                ),
                file=sys.stderr,
                flush=True,
            )
        pending = [c for c in await list_calls(self.session) if not c.settled]
        if not pending:
            return []
        alive = [c for c in pending if process_alive(c.record)]
        if alive:
            print(
                f"toolfold: session {self.settings.session_name!r} has {len(alive)} call(s) "
                "still running in another process; not settling unsettled calls now",
                file=sys.stderr,
                flush=True,
            )
            return []
        # A call that became a task still has a client (it polls tasks/get), so it is
        # finished by toolfold resume's rules: a replay-safe tool is re-run. That runs
        # in the background, while the server answers (its tasks/get among others): a
        # re-run takes as long as the first run did.
        task_calls = {
            r.get("call_id")
            for _, r in await self.session.scan_values(TASK_NAMESPACE)
            if isinstance(r, dict)
        }
        if any(c.tool_call_id in task_calls for c in pending):
            self.tasks.finish_later(self.settings.session_name, self.session)
            return []
        tools = [dataclasses.replace(t, replay_safe=False) for t in self._served]
        resumer = Harness(tools, context=self._context, session=self.session)
        results = await resumer.resume(notes=orphan_notes(orphans))
        for result in results:
            if result.state is not None:
                await self._record_settled(result.tool_call_id, result)
        return results

    # -- the MCP surface -------------------------------------------------------------

    def server(self) -> Server[Any]:
        """The SDK's low-level server, with this host's handlers."""
        server: Server[Any] = Server(
            "toolfold",
            version=package_version(),
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool_or_task,  # type: ignore[arg-type]  # a task, too
        )
        self.serve_tasks(server)
        return server

    def serve_tasks(self, server: Server[Any]) -> None:
        """Advertise the tasks extension on ``server`` and serve its methods (its
        ``tools/call`` handler must be :meth:`_call_tool_or_task`)."""
        server.extensions[TASKS_EXTENSION] = {}
        # Inside the SDK's own tracing middleware: the request span is current.
        server.middleware.append(RequestTelemetry())
        for method, params, handler in self.tasks.methods():
            server.add_request_handler(method, params, handler)

    def initialization_options(self, server: Server[Any]) -> InitializationOptions:
        """What ``server`` announces in its answer to ``initialize``."""
        return server.create_initialization_options()

    async def tool_list(self) -> list[types.Tool]:
        """The MCP tool definitions (input schemas from the pydantic params)."""
        return [
            types.Tool(
                name=t.name,
                description=describe(t, reader=self.reader, sandbox=self.settings.sandbox),
                input_schema=input_schema(t),
                output_schema=OUTPUT_SCHEMA,
                _meta={SIZE_HINT_KEY: size_hint(t)},
            )
            for t in self.settings.tools
        ]

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=await self.tool_list())

    async def resolve(self, name: str) -> Tool[Any] | None:
        """The tool a ``tools/call`` names, or ``None`` (a JSON-RPC error follows)."""
        return next((t for t in self.settings.tools if t.name == name), None)

    def result_for(self, tool: Tool[Any], result: ToolResult, call_id: str) -> types.CallToolResult:
        """The MCP result of a settled call."""
        return call_tool_result(
            result,
            retain=tool.output.retain,
            call_id=call_id,
            session=self.settings.session_name,
            reader=self.reader,
            size_hint=size_hint(tool),
        )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """A ``tools/call`` answered with its result, never a task."""
        result = await self._dispatch(ctx, params, tasks=False)
        assert isinstance(result, types.CallToolResult)
        return result

    async def _call_tool_or_task(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | CreateTaskResult:
        """A ``tools/call`` answered with its result, or with a task when the request
        negotiated the extension and the call runs past the tool's delay."""
        return await self._dispatch(ctx, params, tasks=True)

    async def _dispatch(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, *, tasks: bool
    ) -> types.CallToolResult | CreateTaskResult:
        tool = await self.resolve(params.name)
        if tool is None:
            known = ", ".join(sorted(self.harness.tools))
            raise MCPError(
                types.INVALID_PARAMS, f"unknown tool {params.name!r}; this server offers: {known}"
            )
        args: dict[str, Any] = dict(params.arguments or {})
        call_id = f"mcp-{uuid.uuid4().hex[:12]}"
        can_task = tasks and negotiated(ctx.protocol_version, ctx.meta)
        if tasks and not can_task and tool.name in self.settings.tasks.required:
            raise missing_extension()  # before anything runs or is recorded
        after = self.settings.tasks.after_for(tool.name) if can_task else None
        reporter = self.progress_for(tool, call_id, ctx) if progress_token(ctx.meta) else None
        cancel = asyncio.Event()
        started = asyncio.Event()
        # A tool that asks its client for input (ask_client) makes its call a task at
        # once; a call that cannot be a task cannot ask.
        inputs = CallInputs(allowed=after is not None, cancel=cancel)
        asked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        inputs.on_ask = lambda: None if asked.done() else asked.set_result(True)
        self._inputs[call_id] = inputs
        if after is not None:
            self.tasks.expect(call_id)
            self._hooks.started[call_id] = started
        task = asyncio.create_task(
            self._run(call_id, tool.name, args, cancel, inputs), name=call_id
        )
        self._calls[call_id] = _Call(cancel, task)
        task.add_done_callback(lambda done: self._ended(call_id, done))
        handoff = self.task_handoff(tool, call_id) if after is not None else None
        try:
            if handoff is not None:
                # The upstream decides: a task of its own, or an answer.
                await asyncio.wait({task, handoff}, return_when=asyncio.FIRST_COMPLETED)
                if not task.done() and handoff.result() is not None:
                    raise TimeoutError
            # Shielded: the SDK interrupts this handler on notifications/cancelled; the
            # call itself must instead see its cancel event and settle as cancelled.
            if after is not None and not task.done():
                if after > 0:
                    waits: set[asyncio.Future[Any]] = {task, asked}
                    await asyncio.wait(waits, timeout=after, return_when=FIRST)
                if not task.done():
                    raise TimeoutError
            result = await asyncio.shield(task)
        except TimeoutError:
            # Still running: answer with a task (committed first), and stop sending
            # progress, which the spec does not carry for a task.
            if reporter is not None:
                reporter.stop()
            # The call is in the store before its task is (and both before the handle).
            waiter = asyncio.ensure_future(started.wait())
            try:
                await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()
                self._hooks.started.pop(call_id, None)
            upstream = handoff.result() if handoff is not None and handoff.done() else None
            return await self.tasks.create(
                call_id, tool.name, auth_scope(ctx.request, self.session_name), upstream
            )
        except asyncio.CancelledError:
            if reporter is not None:
                reporter.stop()
            cancel.set()
            raise
        finally:
            self._hooks.started.pop(call_id, None)
            if handoff is not None and not handoff.done():
                handoff.cancel()
            asked.cancel()
            if after is not None and not self.tasks.is_task(call_id):
                self.tasks.forget(call_id)
        error = protocol_error(result)
        if error is not None:
            # The request failed, not just the tool's work: the JSON-RPC error, as is
            # (the call, its output and the error stay in the store).
            raise MCPError(error["code"], error["message"], error.get("data"))
        return self.result_for(tool, result, call_id)

    def progress_for(
        self, tool: Tool[Any], call_id: str, ctx: ServerRequestContext[Any]
    ) -> Stoppable:
        """The progress reporter of a call whose request carries a progress token."""
        session = ctx.session

        async def send(progress: float, message: str) -> None:
            await session.report_progress(progress, None, message)

        reporter = ProgressReporter(send, self.settings.pacing)
        self._reporters[call_id] = reporter
        return reporter

    def _ended(self, call_id: str, task: asyncio.Task[ToolResult]) -> None:
        self._calls.pop(call_id, None)
        self._inputs.pop(call_id, None)
        if not task.cancelled() and task.exception() is not None:
            # The handler re-raises it to the client when it still waits; after a
            # cancel nobody does, so say it here rather than lose it.
            print(
                f"toolfold: call {call_id} failed outside its tool: {task.exception()!r}",
                file=sys.stderr,
                flush=True,
            )

    async def _run(
        self,
        call_id: str,
        name: str,
        args: dict[str, Any],
        cancel: asyncio.Event,
        inputs: CallInputs | None = None,
    ) -> ToolResult:
        if inputs is not None:
            bind(inputs)  # this task's context: the tool's task inherits it
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        run_id = f"run-{call_id}"
        record = new_run_record(_summary(name, args), str(self.settings.spill_dir), started)
        self._mark_activity()  # the viewer's landing page orders by it
        # Committed with the call's lease, and its totals with its settlement: no commit
        # of their own (docs/BENCHMARKS.md, "The cost of a small call").
        self._hooks.record_call(
            run_id,
            call_id,
            start=[set_value(run_record_address(call_id), record)],
            settled=lambda result: (
                [settled_record(call_id, record, result.state)] if result.state is not None else []
            ),
        )
        try:
            [result] = await self.harness.run(
                [ToolCall(call_id, name, args)], run_id=run_id, cancel=cancel
            )
        except Exception as exc:
            await self.tasks.ended(call_id, None, exc)
            raise
        finally:
            self._reporters.pop(call_id, None)
        await self.tasks.ended(call_id, result)
        return result

    def _mark_activity(self) -> None:
        # At most once per ACTIVITY_MARK_INTERVAL: the landing page orders sessions by
        # it, for which a second is fine-grained enough, and a mark is ~15 system calls
        # (docs/BENCHMARKS.md, "Sixth round: the proxy's CPU"). Judged again each time
        # it is made (never touched through a link planted since the start: a bare
        # utime would follow one at spill/), made again if it has gone since.
        now = monotonic()
        if now - self._marked_at < ACTIVITY_MARK_INTERVAL:
            return
        self._marked_at = now
        mark_activity(self.settings.spill_dir)

    async def _record_settled(self, call_id: str, result: ToolResult) -> None:
        if result.state is not None:
            record = await self.session.get_value(run_record_address(call_id))
            if isinstance(record, dict):
                await self.session.commit([settled_record(call_id, record, result.state)])

    # -- shutdown --------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Calls in flight."""
        return len(self._calls)

    async def aclose(self, grace: float = SHUTDOWN_GRACE) -> None:
        """Cancel the calls still running (the client went away) and let them settle
        as cancelled; a call that does not stop within ``grace`` is interrupted."""
        calls = list(self._calls.values())
        for call in calls:
            call.cancel.set()
        tasks = [c.task for c in calls]
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late)
        await self.tasks.aclose()
        # Nothing runs on unnoticed: the commands bash left in the background stop too.
        env = self._context.env
        if isinstance(env, LocalExecEnv):
            for read in await env.aclose():
                print(
                    f"toolfold mcp: stopped background command {read.handle} "
                    f"({read.command[:80]!r}) as the server closed",
                    file=sys.stderr,
                )
            # ... and the calls recording their output settle, saying so.
            await background_settled()


__all__ = ["INSTRUCTIONS", "McpHost", "McpSettings"]
