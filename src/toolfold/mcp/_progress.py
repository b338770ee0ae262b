"""MCP progress notifications for a running call, paced like every other live stream.

A call's sink tells the reporter when it changed; the reporter's ``AdaptivePublisher``
(the execution environment's pacing policy: at most every 100 ms, slower for big
updates) asks for the latest totals only when a notification is due, so a command
printing a million lines sends tens of notifications, not a million.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from mcp.server.context import ServerRequestContext

from toolfold._units import format_bytes, plural
from toolfold.execenv import AdaptivePublisher, CallbackError
from toolfold.harness import CallInfo, Durability, DurableHooks, Pacing, ToolContext, ToolResult
from toolfold.output import ToolOutput

SendProgress = Callable[[float, str], Awaitable[None]]
"""``await send(progress, message)``: one ``notifications/progress`` to the caller."""

MAX_LAST_LINE = 80
"""Characters of the latest output line quoted in a progress message."""


def status_line(total_lines: int, total_bytes: int, text: str) -> str:
    """``4,000 lines / 38.2 KiB so far · last: step 4000`` (one line, bounded)."""
    status = f"{plural(total_lines, 'line')} / {format_bytes(total_bytes)} so far"
    # Any whitespace (a carriage return, a Unicode line separator) becomes one space.
    last = " ".join(text.rstrip("\n").rpartition("\n")[2].split())
    if last:
        if len(last) > MAX_LAST_LINE:
            last = last[: MAX_LAST_LINE - 1] + "…"
        status += f" · last: {last}"
    return status


P = TypeVar("P")


class _Paced(Generic[P]):
    """Progress notifications through an ``AdaptivePublisher``: ``_produce`` is asked
    for the latest payload (and its size) only when a notification is due."""

    def __init__(self, pacing: Pacing) -> None:
        self._stopped = False
        self._publisher: AdaptivePublisher[P] = AdaptivePublisher(
            produce=self._produce,
            consume=self._consume,
            min_interval=pacing.min_interval,
            target_rate=pacing.target_rate,
        )

    @property
    def sent(self) -> int:
        """How many notifications were handed to the transport."""
        return self._publisher.publications

    def stop(self) -> None:
        """Send nothing more (the caller cancelled: nobody is listening)."""
        self._stopped = True

    def _produce(self) -> tuple[P, int] | None:
        raise NotImplementedError

    async def _consume(self, payload: P) -> None:
        raise NotImplementedError

    async def _finish(self) -> None:
        # A notification the transport could not deliver (the client went away):
        # progress is advisory, the call and its result are unaffected.
        with contextlib.suppress(CallbackError):
            await self._publisher.finish()


class ProgressReporter(_Paced[tuple[int, str]]):
    """Progress of one call: ``progress`` is the output's byte count so far (it only
    grows, as MCP requires), ``message`` a one-line status. Nothing is sent after
    :meth:`close`, which runs before the result is returned."""

    def __init__(self, send: SendProgress, pacing: Pacing) -> None:
        super().__init__(pacing)
        self._send = send
        self._sink: ToolOutput | None = None
        self._unlisten: Callable[[], None] | None = None
        self._last = 0

    def attach(self, sink: ToolOutput) -> None:
        """Follow ``sink``'s changes."""
        self._sink = sink
        self._unlisten = sink.on_change(self._publisher.mark_dirty)

    def _produce(self) -> tuple[tuple[int, str], int] | None:
        sink = self._sink
        if sink is None or self._stopped:
            return None
        t = sink.truncation
        total = int(t["total_bytes"])
        if total <= self._last:
            return None  # progress must increase; a details-only change is not progress
        self._last = total
        message = status_line(int(t["total_lines"]), total, sink.text)
        return (total, message), len(message) + 64

    async def _consume(self, payload: tuple[int, str]) -> None:
        await self._send(float(payload[0]), payload[1])

    async def close(self) -> None:
        """Wait for deliveries in flight, then stop. The settled state is not sent as
        progress: the result, which follows at once, carries it."""
        self._stopped = True
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        await self._finish()


Forwarded = tuple[float, float | None, str | None]
"""An upstream's ``(progress, total, message)``."""


class ForwardedProgress(_Paced[Forwarded]):
    """An upstream's progress notifications, forwarded to the client paced (only the
    latest is sent when they come faster)."""

    def __init__(self, ctx: ServerRequestContext[Any], pacing: Pacing) -> None:
        super().__init__(pacing)
        self._session = ctx.session
        self._latest: Forwarded | None = None

    async def update(self, progress: float, total: float | None, message: str | None) -> None:
        """The upstream's progress callback."""
        self._latest = (progress, total, message)
        self._publisher.mark_dirty()

    def _produce(self) -> tuple[Forwarded, int] | None:
        if self._latest is None or self._stopped:
            return None
        latest, self._latest = self._latest, None
        return latest, 64 + len(latest[2] or "")

    async def _consume(self, payload: Forwarded) -> None:
        await self._session.report_progress(*payload)

    async def close(self) -> None:
        """Deliver the latest pending update, then stop (before the result is returned)."""
        await self._finish()
        self._stopped = True


class McpHooks(DurableHooks):
    """Durability (checkpoints, settlement) plus progress reporters per call."""

    def __init__(self, durability: Durability, reporters: dict[str, ProgressReporter]) -> None:
        super().__init__(durability)
        self._reporters = reporters
        self.sinks: dict[str, ToolOutput] = {}
        """The output of each call running (what ``tasks/get`` reads its status from)."""
        self.started: dict[str, asyncio.Event] = {}
        """Set once a call's operation is recorded in the store and its tool starts."""

    async def on_sink_created(
        self, call: CallInfo, sink: ToolOutput, context: ToolContext
    ) -> ToolContext:
        reporter = self._reporters.get(call.tool_call_id)
        if reporter is not None:
            reporter.attach(sink)
        self.sinks[call.tool_call_id] = sink
        started = self.started.pop(call.tool_call_id, None)
        if started is not None:
            started.set()  # on_run_start recorded the operation before any sink
        return await super().on_sink_created(call, sink, context)

    async def before_settle(self, call: CallInfo, sink: ToolOutput, result: ToolResult) -> None:
        reporter = self._reporters.pop(call.tool_call_id, None)
        self.sinks.pop(call.tool_call_id, None)
        if reporter is not None:
            await reporter.close()  # the last progress goes out before the result
        await super().before_settle(call, sink, result)


def progress_token(meta: Any) -> Any:
    """The request's ``progressToken`` (``None`` when the caller asked for no progress)."""
    return meta.get("progress_token") if isinstance(meta, dict) else None


__all__ = [
    "ForwardedProgress",
    "McpHooks",
    "ProgressReporter",
    "SendProgress",
    "progress_token",
    "status_line",
]
