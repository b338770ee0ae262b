"""``MessageWriter``: one assistant message through the same fold as tool output.

``MessageStart`` (identity), paced ``MessageUpdate`` op batches on the message (the
first a base batch), ``MessageEnd`` (stop reason, is_error): a subscriber folding
the updates holds the message at every step, and nothing is resent at the end.
With a session the message is durable: paced ``pending.assistant_output``
checkpoints, and one transaction that writes the final message and retires its
scope; after a crash ``Harness.resume()`` settles it as interrupted, keeping
what was generated.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from toolfold import _json
from toolfold.durability import DEFAULT_CHECKPOINT_INTERVAL, DurableMessage, start_message
from toolfold.execenv import AdaptivePublisher, Clock
from toolfold.output import AssistantMessageState, AssistantOutput
from toolfold.storage import Session

from ._bus import EventBus
from ._hooks import ToolCall
from .events import MessageEnd, MessageStart, MessageUpdate


class MessageWriter:
    """``async with MessageWriter(bus=..., run_id=..., turn_id=...) as w:`` then feed
    the model's deltas to ``w.out`` (``text``, ``thinking``, ``tool_call``) and end
    it with ``w.out.end(stop_reason)``. Leaving the block without an end records
    ``"stop"``; an exception records ``"error"`` (``"interrupted"`` for a cancel),
    with the partial message kept. ``w.message`` is the settled message."""

    def __init__(
        self,
        *,
        bus: EventBus,
        run_id: str,
        turn_id: str,
        message_id: str | None = None,
        session: Session | None = None,
        interval: float = DEFAULT_CHECKPOINT_INTERVAL,
        min_interval: float = 0.1,
        target_rate: float = 100 * 1024,
        clock: Clock | None = None,
    ) -> None:
        self.bus = bus
        self.run_id = run_id
        self.turn_id = turn_id
        self.message_id = message_id if message_id is not None else f"msg-{uuid.uuid4().hex[:12]}"
        self.session = session
        self.interval = interval
        self.out = AssistantOutput()
        self.message: AssistantMessageState | None = None
        self.entry: dict[str, Any] | None = None
        self.durable: DurableMessage | None = None
        self._live = self.out.open_stream()
        ids = (run_id, turn_id, self.message_id)

        def produce() -> tuple[list[Any], int] | None:
            ops = self._live.take()
            return (ops, len(_json.dumps(ops))) if ops else None

        def consume(ops: list[Any]) -> None:
            bus.publish(MessageUpdate(*ids, ops))

        self._publisher: AdaptivePublisher[list[Any]] = AdaptivePublisher(
            produce=produce,
            consume=consume,
            min_interval=min_interval,
            target_rate=target_rate,
            clock=clock,
        )
        self._unlisten: list[Any] = []

    async def __aenter__(self) -> MessageWriter:
        self.bus.publish(MessageStart(self.run_id, self.turn_id, self.message_id))
        self._unlisten.append(self.out.on_change(self._publisher.mark_dirty))
        self._publisher.mark_dirty()  # the base batch right after message_start
        if self.session is not None:
            self.durable = await start_message(
                self.session,
                run_id=self.run_id,
                turn_id=self.turn_id,
                message_id=self.message_id,
                source=self.out.open_stream(),
                interval=self.interval,
            )
            self._unlisten.append(self.out.on_change(self.durable.notify))
            self.durable.notify()
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if not self.out.ended:
            if isinstance(exc, asyncio.CancelledError):
                self.out.end("interrupted", is_error=True)
            elif exc is not None:
                self.out.end("error", is_error=True, error=f"{type(exc).__name__}: {exc}")
            else:
                self.out.end("stop")
        for unlisten in self._unlisten:
            unlisten()
        await self._publisher.finish()  # the last live batch goes out before message_end
        self._live.close()
        final = self.out.snapshot()
        self.message = final
        if self.durable is not None:
            await self.durable.stream.force()
            self.entry = await self.durable.settle(dict(final))
        self.bus.publish(
            MessageEnd(
                self.run_id,
                self.turn_id,
                self.message_id,
                stop_reason=str(final.get("stop_reason")),
                is_error=bool(final.get("is_error")),
            )
        )

    def tool_calls(self) -> list[ToolCall]:
        """The tool calls of the settled message (arguments parsed; text that is not a
        JSON object is passed on as is, so the tool's validation names the problem)."""
        calls: list[ToolCall] = []
        for part in (self.message or self.out.snapshot()).get("content", []):
            if part.get("type") != "tool_call":
                continue
            text = part.get("arguments") or "{}"
            try:
                args: Any = _json.loads(text)
            except _json.DecodeError:
                args = text
            calls.append(ToolCall(str(part.get("id")), str(part.get("name")), args))
        return calls
