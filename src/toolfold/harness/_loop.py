"""``ToolLoop``: one agent run's side of toolfold tools (the framework adapters and
the reference agent loop share it).

A framework's loop asks it to run one call at a time; it runs each through
``execute_tool_call`` (live events on the bus, durable with a session) and keeps
the loop contract: which tools the model sees next turn (``add_tools``), whether
the run must end after this batch (``terminate``), and the usage tools reported.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from toolfold.durability import Durability
from toolfold.output import ToolOutput, Usage
from toolfold.storage import Session

from ._bus import EventBus
from ._context import ToolContext
from ._errors import ToolNotAvailableError
from ._execute import Pacing, execute_tool_call
from ._result import ToolResult
from ._tool_body import DEFAULT_CANCEL_GRACE
from ._tools import Tool
from .events import HarnessEvent, RunEnd, RunStart

_USAGE_KEYS = frozenset(Usage.__annotations__)


class ToolLoop:
    """The toolfold side of one agent run.

    - ``tools``: every tool the run may use; ``active`` (default: all of them) are
      the ones the model sees from the first turn, the others become visible when a
      call's ``add_tools`` names them.
    - ``session``: a storage session makes every call durable on its own
      (checkpoints, memos, settlement; ``toolfold resume`` settles a crashed call).
    - ``bus``: the harness event bus the calls stream into (attach ``Lanes`` /
      ``LaneHost`` to it for live views); ``lane`` names the lane of this run.

    The loop contract (``docs/writing-tools.md``): after each call, ``added_tools``
    join :attr:`active`, ``terminate`` sets :attr:`terminated` (the adapter ends the
    run after the current tool batch) and ``usage`` is summed into :attr:`usage`.
    """

    def __init__(
        self,
        tools: Iterable[Tool[Any]],
        *,
        session: Session | None = None,
        bus: EventBus | None = None,
        context: ToolContext | None = None,
        lane: str = "default",
        run_id: str | None = None,
        active: Iterable[str] | None = None,
        cancel_grace: float = DEFAULT_CANCEL_GRACE,
        pacing: Pacing | None = None,
    ) -> None:
        self.tools: dict[str, Tool[Any]] = {}
        for t in tools:
            if t.name in self.tools:
                raise ToolNotAvailableError(
                    f"two tools are named {t.name!r}; tool names must be unique in a loop"
                )
            self.tools[t.name] = t
        names = list(self.tools) if active is None else list(active)
        for name in names:
            self._check_known(name, "active")
        self.active: list[str] = names
        self.durability = Durability(session) if session is not None else None
        self.bus = bus if bus is not None else EventBus()
        self.context = context if context is not None else ToolContext()
        self.lane = lane
        self.run_id = run_id if run_id is not None else f"run-{uuid.uuid4().hex[:12]}"
        self.cancel_grace = cancel_grace
        self.pacing = pacing
        self.terminated = False
        self.usage: Usage = {}
        self.results: list[ToolResult] = []
        self._started = False
        self._ended = False
        self._inflight: set[asyncio.Task[ToolResult]] = set()

    def _check_known(self, name: str, what: str) -> None:
        if name not in self.tools:
            known = ", ".join(sorted(self.tools)) or "(none)"
            raise ToolNotAvailableError(
                f"{what}: unknown tool {name!r}; the loop's tools are: {known}"
            )

    def definitions(self) -> list[dict[str, Any]]:
        """``{"name", "description", "parameters"}`` of the tools the model sees now."""
        return [self.tools[name].definition() for name in self.active]

    def start(self) -> None:
        """Publish ``RunStart`` (once; the first call does it if the adapter did not)."""
        if not self._started:
            self._started = True
            self.bus.publish(RunStart(self.run_id, self.lane))

    def end(self) -> None:
        """Publish ``RunEnd`` (once, and only after a start)."""
        if self._started and not self._ended and not self.bus.closed:
            self._ended = True
            self.bus.publish(RunEnd(self.run_id))

    async def __aenter__(self) -> ToolLoop:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.drain()
        finally:
            self.end()

    async def drain(self) -> None:
        """Wait until every call this loop started has settled.

        A framework that cancels its tool tasks may not wait for them; the calls'
        settlement (partial output kept, made durable) still has to finish before
        the run is over."""
        while self._inflight:
            await asyncio.wait(set(self._inflight))

    async def call(
        self,
        name: str,
        args: Any,
        tool_call_id: str,
        *,
        turn_id: str = "turn-1",
        cancel: asyncio.Event | None = None,
        on_event: Callable[[HarnessEvent], None] | None = None,
    ) -> ToolResult:
        """Run one call and apply the loop contract to its result.

        A name that is not an active tool settles as an ``unknown_tool`` error
        without running (the framework's loop goes on). ``on_event`` sees this
        call's events as they are published (an adapter forwards them into the
        framework's own stream). Cancelling the task running this keeps the
        partial output (outcome ``interrupted``) and re-raises.
        """
        self.start()
        tool = self.tools.get(name)
        if tool is None or name not in self.active:
            result = self._not_available(name, tool_call_id, tool is not None)
        else:
            remove = None
            if on_event is not None:
                remove = self.bus.add_listener(_only_call(tool_call_id, on_event))
            try:
                inner = asyncio.ensure_future(
                    execute_tool_call(
                        tool,
                        tool_call_id,
                        args,
                        run_id=self.run_id,
                        turn_id=turn_id,
                        bus=self.bus,
                        context=self.context,
                        cancel=cancel,
                        durability=self.durability,
                        known_tools=self.tools,
                        cancel_grace=self.cancel_grace,
                        pacing=self.pacing,
                    )
                )
                self._inflight.add(inner)
                inner.add_done_callback(self._inflight.discard)
                try:
                    result = await asyncio.shield(inner)
                except asyncio.CancelledError:
                    # The framework cancelled the call: cancel the tool the harness way
                    # (partial output kept, settled as interrupted) and let drain() or
                    # this wait see the settlement through.
                    inner.cancel()
                    await asyncio.wait({inner})
                    raise
            finally:
                if remove is not None:
                    remove()
        self._apply_contract(result)
        return result

    def _not_available(self, name: str, tool_call_id: str, known: bool) -> ToolResult:
        active = ", ".join(self.active) or "(none)"
        if known:
            notice = (
                f"Tool {name!r} is not available yet (a tool's add_tools exposes it); "
                f"available tools: {active}. The call was not run."
            )
        else:
            notice = f"Unknown tool {name!r}; available tools: {active}. The call was not run."
        state = ToolOutput().settle(notice)
        return ToolResult.from_state(
            state, tool_call_id=tool_call_id, tool_name=name, outcome="unknown_tool"
        )

    def _apply_contract(self, result: ToolResult) -> None:
        self.results.append(result)
        if result.usage:
            total: dict[str, Any] = dict(self.usage)
            for key, amount in result.usage.items():
                if key in _USAGE_KEYS and isinstance(amount, int | float):
                    total[key] = total.get(key, 0) + amount
            self.usage = total  # type: ignore[assignment]
        if result.is_error:
            # A failed call's add_tools were never validated against a finished run of
            # the tool; its terminate flag still counts (set before a raise, honoured).
            self.terminated = self.terminated or result.terminate
            return
        for name in result.added_tools or ():
            if name not in self.active:
                self.active.append(name)
        self.terminated = self.terminated or result.terminate


def _only_call(
    tool_call_id: str, forward: Callable[[HarnessEvent], None]
) -> Callable[[HarnessEvent], None]:
    def listener(event: HarnessEvent) -> None:
        if getattr(event, "tool_call_id", None) == tool_call_id:
            forward(event)

    return listener


def model_images(result: ToolResult) -> list[tuple[bytes, str]]:
    """The image blocks of a result as ``(raw bytes, mime type)`` pairs."""
    import base64

    images: list[tuple[bytes, str]] = []
    for block in result.content[1:]:
        if block.get("type") == "image":
            images.append((base64.b64decode(block["data"]), str(block["mime_type"])))
    return images
