"""Starting bash tool calls in a lane through the harness (backs ``POST /v1/lanes/{lane}/commands``)."""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolfold.harness import EventBus, Harness, Lanes, Tool, ToolCall, ToolContext

__all__ = ["HarnessCommands"]

log = logging.getLogger("toolfold.server")


class HarnessCommands:
    """A command runner: each command is a one-call run of the ``bash`` tool in its lane.

    Without a ``context``, commands run on this host (``LocalExecEnv``) with spill
    files under ``spill_dir``. The harness's events reach ``lanes`` through a synchronous bus listener, so the
    lane views (and every subscriber) see the call live. ``await runner(lane,
    command)`` returns the tool call id as soon as the run is scheduled; ``aclose()``
    cancels runs still going (their partial output settles with the harness's
    interruption marker) and waits for them, so nothing outlives the server.
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
        self._owned_spill_dir: Path | None = None
        if context is None:
            # Commands run on this host; full output spills under `spill_dir`
            # (a fresh temporary directory unless given).
            from toolfold.execenv import LocalExecEnv

            if spill_dir is None:
                spill_dir = tempfile.mkdtemp(prefix="toolfold-spill-")
                self._owned_spill_dir = Path(spill_dir)
            context = ToolContext(env=LocalExecEnv(spill_dir))
        self.context = context
        self.bus = bus if bus is not None else EventBus()
        self.bus.add_listener(lanes.handle)
        self.tool_name = tool_name
        self.extra_args = dict(extra_args or {})
        self._harnesses: dict[str, Harness] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def _harness(self, lane: str) -> Harness:
        harness = self._harnesses.get(lane)
        if harness is None:
            harness = Harness(self.tools, context=self.context, bus=self.bus, lane=lane)
            self._harnesses[lane] = harness
        return harness

    async def __call__(self, lane: str, command: str) -> str:
        tool_call_id = f"call-{uuid.uuid4().hex[:12]}"
        call = ToolCall(tool_call_id, self.tool_name, {**self.extra_args, "command": command})
        task = asyncio.create_task(self._harness(lane).run([call]), name=f"command {tool_call_id}")
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return tool_call_id

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("command run %s failed", task.get_name(), exc_info=task.exception())

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
        if self._owned_spill_dir is not None:
            shutil.rmtree(self._owned_spill_dir, ignore_errors=True)
            self._owned_spill_dir = None
