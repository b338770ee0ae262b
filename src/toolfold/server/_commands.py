"""Starting bash tool calls in a lane through the harness (backs ``POST /v1/lanes/{lane}/commands``)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfold.harness import (
    CallInfo,
    Durability,
    DurableHooks,
    EventBus,
    Harness,
    Lanes,
    Tool,
    ToolCall,
    ToolContext,
    ToolResult,
)
from toolfold.history import (
    check_session_name,
    mark_activity,
    new_run_record,
    run_record_address,
    settled_record,
)
from toolfold.output import ToolOutput
from toolfold.storage import StorageError, set_value, storage_failure

from ._errors import CommandRejectedError
from ._sessions import SessionPool, session_pool

if TYPE_CHECKING:
    from toolfold.storage import Repository, Session

__all__ = ["HarnessCommands"]


log = logging.getLogger("toolfold.server")


class _RecordingHooks(DurableHooks):
    """Durable hooks that also complete the call's run record when it settles.

    Written right after the settlement commit and before ``ToolSettled`` is
    published, so whoever reloads the stored session on seeing a call settle gets
    its truncation totals too (after ``harness.run`` returns would be too late).
    """

    def __init__(
        self, session: Session, records: dict[str, dict[str, Any]], host: str | None
    ) -> None:
        super().__init__(Durability(session, host=host))
        self.records = records

    async def before_settle(self, call: CallInfo, sink: ToolOutput, result: ToolResult) -> None:
        await super().before_settle(call, sink, result)
        record = self.records.get(call.tool_call_id)
        if record is None or result.state is None:
            return
        try:
            await self.session.commit([settled_record(call.tool_call_id, record, result.state)])
        except StorageError:
            # The result itself settled; only the "showing N of M" indicator of the
            # stored history is missing.
            log.exception("recording the output totals of %s failed", call.tool_call_id)


class HarnessCommands:
    """A command runner: each command is a one-call run of the ``bash`` tool in its lane.

    Without a ``context``, commands run on this host (``LocalExecEnv``, in ``cwd``)
    with spill files under ``spill_dir``. The harness's events reach ``lanes``
    through a synchronous bus listener, so the lane views (and every subscriber) see
    the call live. ``await runner(lane, command)`` returns the tool call id as soon
    as the run is scheduled; ``aclose()`` cancels runs still going (their partial
    output settles with the harness's interruption marker) and waits for them, so
    nothing outlives the server.

    With a ``repository`` (a ``toolfold.storage`` repository, or the app's
    ``SessionPool``) every command is **durable**, exactly as ``toolfold run`` runs
    one: lane ``L`` is session ``L`` of the store (created on its first command), the
    call runs through a harness with ``Harness(..., session=...)``'s durable hooks
    (checkpoints while it runs, the settled result in the transcript, ``toolfold
    resume L`` after a crash), a run record (command, this process, spill directory)
    is committed before it starts and completed with the truncation totals and spill
    file as it settles (before ``ToolSettled`` is published), and spill
    files go under ``spill_dir/L/`` (pass one: the temporary default is removed on
    close, and the stored results would name files that are gone). A lane that cannot name a session, or a store
    that cannot record the command, is refused with ``CommandRejectedError`` before
    anything runs. With a ``host`` id (``toolfold serve`` gives ``hostname:pid``) each
    durable command is also leased as that host, so if this server dies mid-command
    another one's janitor (``serve --resume-orphans``) settles it once the lease expired.
    """

    def __init__(
        self,
        lanes: Lanes,
        *,
        tools: Iterable[Tool[Any]] | None = None,
        context: ToolContext | None = None,
        spill_dir: Path | str | None = None,
        bus: EventBus | None = None,
        tool_name: str = "bash",
        extra_args: dict[str, Any] | None = None,
        repository: Repository | SessionPool | None = None,
        cwd: Path | str | None = None,
        host: str | None = None,
    ) -> None:
        if tools is None:
            from toolfold.tools import builtin_tools

            tools = builtin_tools()
        self.tools = list(tools)
        if tool_name not in {t.name for t in self.tools}:
            names = ", ".join(sorted(t.name for t in self.tools)) or "(none)"
            raise ValueError(
                f"HarnessCommands needs a tool named {tool_name!r}; the tools given are {names}"
            )
        self.lanes = lanes
        self.sessions = session_pool(repository) if repository is not None else None
        self.cwd = Path(cwd) if cwd is not None else None
        # Durable commands are leased as this host (when given), so another process on
        # the store can tell whether they still run (``serve --resume-orphans``).
        self.host = host
        self._owned_spill_dir: Path | None = None
        self._given_context = context is not None
        if context is None:
            # Commands run on this host; full output spills under `spill_dir`
            # (a fresh temporary directory unless given), per session when durable.
            if spill_dir is None:
                spill_dir = tempfile.mkdtemp(prefix="toolfold-spill-")
                self._owned_spill_dir = Path(spill_dir)
            context = self._local_context(Path(spill_dir))
        self.spill_dir = Path(spill_dir) if spill_dir is not None else None
        self.context = context
        self._contexts: dict[str, ToolContext] = {}
        self.bus = bus if bus is not None else EventBus()
        self.bus.add_listener(lanes.handle)
        self.tool_name = tool_name
        self.extra_args = dict(extra_args or {})
        self._harnesses: dict[str, Harness] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._holds: set[contextlib.AsyncExitStack] = set()

    def _local_context(self, spill_dir: Path) -> ToolContext:
        from toolfold.execenv import LocalExecEnv

        if self.cwd is None:
            return ToolContext(env=LocalExecEnv(spill_dir))
        return ToolContext(env=LocalExecEnv(spill_dir), cwd=self.cwd)

    def _session_spill_dir(self, session: str) -> Path | None:
        return None if self._given_context or self.spill_dir is None else self.spill_dir / session

    def _session_context(self, session: str) -> ToolContext:
        spill = self._session_spill_dir(session)
        if spill is None:
            return self.context
        context = self._contexts.get(session)
        if context is None:
            context = self._contexts[session] = self._local_context(spill)
        return context

    def _harness(self, lane: str) -> Harness:
        harness = self._harnesses.get(lane)
        if harness is None:
            harness = Harness(self.tools, context=self.context, bus=self.bus, lane=lane)
            self._harnesses[lane] = harness
        return harness

    async def __call__(self, lane: str, command: str) -> str:
        """Start ``command`` in ``lane``; return its tool call id once it is scheduled."""
        tool_call_id = f"call-{uuid.uuid4().hex[:12]}"
        # A command started here is watched live until it ends: it never yields.
        waits = {"yield_after": None} if self.tool_name == "bash" else {}
        args = {**waits, **self.extra_args, "command": command}
        call = ToolCall(tool_call_id, self.tool_name, args)
        if self.sessions is None:
            run: Any = self._harness(lane).run([call])
        else:
            run = await self._start_durable(self.sessions, lane, call, command)
        task = asyncio.create_task(run, name=f"command {tool_call_id}")
        self._tasks.add(task)
        task.add_done_callback(functools.partial(self._done, lane, tool_call_id))
        return tool_call_id

    async def _start_durable(
        self, sessions: SessionPool, lane: str, call: ToolCall, command: str
    ) -> Any:
        # Everything that can refuse the command happens here, before it is
        # scheduled, so the client gets the reason and nothing half-starts.
        problem = check_session_name(lane)
        if problem is not None:
            raise CommandRejectedError(
                f"lane {lane!r} cannot be a session of the store ({problem}); "
                "pick a lane name that is also a session name"
            )
        spill = self._session_spill_dir(lane)
        if spill is not None:
            mark_activity(spill)
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        record = new_run_record(command, str(spill) if spill else "", started)
        hold = contextlib.AsyncExitStack()
        try:
            session = await hold.enter_async_context(sessions.use(lane, create=True))
            await session.commit([set_value(run_record_address(call.id), record)])
        except StorageError as exc:
            await hold.aclose()
            raise CommandRejectedError(
                f"the store cannot record a command in session {lane!r}: "
                f"{' '.join(str(exc).split())}",
                status=503,
            ) from exc
        self._holds.add(hold)
        harness = Harness(
            self.tools,
            context=self._session_context(lane),
            bus=self.bus,
            lane=lane,
            hooks=_RecordingHooks(session, {call.id: record}, self.host),
        )
        return self._run_durable(hold, harness, call)

    async def _run_durable(
        self, hold: contextlib.AsyncExitStack, harness: Harness, call: ToolCall
    ) -> None:
        self._holds.discard(hold)
        async with hold:
            await harness.run([call])

    def _done(self, lane: str, call_id: str, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        failure = storage_failure(exc) if self.sessions is not None else None
        if failure is not None:
            # The store refused a write (a full disk): an operational condition, said in
            # one line with what was kept and how to finish; a bug keeps its traceback.
            log.error(
                "command %s in lane %s could not be recorded: %s; it is left unsettled "
                "with its output up to its last checkpoint: once the store can be written "
                "again, `toolfold resume %s` on this store settles it",
                call_id,
                lane,
                " ".join(str(failure).split()),
                lane,
            )
            return
        log.error("command %s in lane %s failed", call_id, lane, exc_info=exc)

    @property
    def running(self) -> int:
        """Runs not finished yet."""
        return len(self._tasks)

    async def wait(self) -> None:
        """Wait until every started run has finished."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel the runs still going, wait for them to settle, and remove the
        temporary spill directory if this runner made it."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        # A run cancelled before its first step never entered its `async with`:
        # hand its session back here.
        for hold in list(self._holds):
            self._holds.discard(hold)
            await hold.aclose()
        if self._owned_spill_dir is not None:
            shutil.rmtree(self._owned_spill_dir, ignore_errors=True)
            self._owned_spill_dir = None
