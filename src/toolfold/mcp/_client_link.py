"""``ClientLink``: what an upstream server sends the proxy's client, passed on, bounded.

The upstream's requests (``sampling/createMessage``, ``elicitation/create``,
``roots/list``) are asked of the client and its answer goes back, at most
``MAX_CLIENT_REQUESTS`` at a time: the excess gets a JSON-RPC error at once. Its
log messages, resource updates and list-change notifications go through one bounded
outbox and one sender task: list changes and updates of one resource are coalesced
(one pending each), log messages queue up to ``MAX_QUEUED``; past that a
notification is dropped and counted, and the client is told the count in one log
message (logger ``toolfold``) once the outbox has drained. A client that stops reading
altogether (one write stays blocked while ``STALL_DROPS`` notifications had to be
dropped) pauses the upstream: ``gate`` holds the upstream's reader until the write
completes. The link learns the client's session from the requests the client makes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

T = TypeVar("T")

PASSED_ON = (
    types.LoggingMessageNotification,
    types.ResourceUpdatedNotification,
    types.ResourceListChangedNotification,
    types.ToolListChangedNotification,
    types.PromptListChangedNotification,
)
"""The upstream notifications sent on to the client (progress goes with the call it
reports on)."""

MAX_CLIENT_REQUESTS = 16
"""The upstream's requests to the client (sampling, elicitation, roots) in flight."""

MAX_QUEUED = 256
"""Notifications waiting for the client, coalesced ones included."""

MAX_LOG_DATA = 16 * 1024
"""Characters of one log message's ``data`` (as JSON) passed on; a longer one is cut."""

STALL_DROPS = 1000
"""Notifications dropped during one blocked write that make the client count as
stopped (see the module docstring)."""


def _key(message: Any, serial: int) -> tuple[str, str]:
    # Notifications with the same key are one pending notification (coalesced).
    if isinstance(message, types.ResourceUpdatedNotification):
        return ("updated", str(message.params.uri))
    if isinstance(message, types.LoggingMessageNotification):
        return ("log", str(serial))
    return ("changed", type(message).__name__)


def _bounded_log(message: types.LoggingMessageNotification) -> types.LoggingMessageNotification:
    data = message.params.data
    if isinstance(data, str) and len(data) <= MAX_LOG_DATA:
        return message
    pieces: list[str] = []
    size = 0
    for part in json.JSONEncoder(ensure_ascii=False).iterencode(data):
        pieces.append(part)
        size += len(part)
        if size > MAX_LOG_DATA:
            break
    else:
        if not isinstance(data, str):
            return message
    text = "".join(pieces)[:MAX_LOG_DATA]
    cut = f"{text}… [toolfold: cut to {MAX_LOG_DATA:,} characters]"
    params = message.params.model_copy(update={"data": cut})
    return message.model_copy(update={"params": params})


class ClientLink:
    """The proxy's client, as seen from the upstream (see the module docstring)."""

    def __init__(self, passes: Callable[[Any], Awaitable[bool]] | None = None) -> None:
        self.session: ServerSession | None = None
        self._passes = passes
        """Asked of each notification first: ``False`` leaves it out."""
        self._asking = 0
        self._queue: OrderedDict[tuple[str, str], Any] = OrderedDict()
        self._serial = 0
        self.dropped = 0
        """Notifications dropped since the client was last told."""
        self._stuck_drops = 0
        self._written = asyncio.Event()
        self._written.set()
        self._wake = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None

    def seen(self, ctx: ServerRequestContext[Any]) -> None:
        """The client made a request: this is the session to reach it on."""
        self.session = ctx.session

    def callbacks(self) -> dict[str, Any]:
        """The upstream ``ClientSession``'s callbacks that lead here."""
        return {
            "sampling_callback": self.sample,
            "elicitation_callback": self.elicit,
            "list_roots_callback": self.roots,
            "message_handler": self.notified,
        }

    async def _ask(self, ask: Callable[[ServerSession], Awaitable[T]]) -> T | types.ErrorData:
        session = self.session
        if session is None:
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message="no client is connected to the proxy"
            )
        if self._asking >= MAX_CLIENT_REQUESTS:
            return types.ErrorData(
                code=types.INTERNAL_ERROR,
                message=f"the proxy already has {MAX_CLIENT_REQUESTS} requests to its client "
                "in flight; ask again once one is answered",
            )
        self._asking += 1
        try:
            return await ask(session)
        except MCPError as exc:
            return exc.error
        except Exception as exc:
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"the proxy's client could not answer: {exc}"
            )
        finally:
            self._asking -= 1

    async def sample(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        """An upstream's ``sampling/createMessage``, asked of the client."""
        return await self._ask(
            lambda s: s.create_message(
                params.messages,
                max_tokens=params.max_tokens,
                system_prompt=params.system_prompt,
                include_context=params.include_context,
                temperature=params.temperature,
                stop_sequences=params.stop_sequences,
                metadata=params.metadata,
                model_preferences=params.model_preferences,
            )
        )

    async def elicit(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """An upstream's ``elicitation/create``, asked of the client."""
        return await self._ask(
            lambda s: s.send_request(types.ElicitRequest(params=params), types.ElicitResult)
        )

    async def roots(self, context: Any) -> types.ListRootsResult | types.ErrorData:
        """An upstream's ``roots/list``, asked of the client."""

        async def ask(session: ServerSession) -> types.ListRootsResult:
            with warnings.catch_warnings():
                # Deprecated by the SDK for a protocol version clients do not speak
                # yet; the warning would be noise on the proxy's stderr.
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                return await session.list_roots()

        return await self._ask(ask)

    async def notified(self, message: Any) -> None:
        """An upstream's notification (or transport fault): the ones in ``PASSED_ON``
        go to the outbox (see the module docstring)."""
        if self.session is None or not isinstance(message, PASSED_ON):
            return
        if self._passes is not None and not await self._passes(message):
            return
        self._serial += 1
        key = _key(message, self._serial)
        if key in self._queue:
            return  # coalesced: the one pending says the same
        if len(self._queue) >= MAX_QUEUED:
            self.dropped += 1
            if not self._written.is_set():
                self._stuck_drops += 1
            return
        if isinstance(message, types.LoggingMessageNotification):
            message = _bounded_log(message)
        self._queue[key] = message
        self._wake.set()
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_all(), name="mcp proxy notifications")

    async def gate(self) -> None:
        """Return when the upstream may be read on: at once, unless the client stopped
        reading (then once its blocked write completes)."""
        while self._stuck_drops >= STALL_DROPS:
            await self._written.wait()

    async def _send_all(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue or self.dropped:
                if self._queue:
                    _, message = self._queue.popitem(last=False)
                else:
                    message = self._dropped_note()
                await self._send(message)

    def _dropped_note(self) -> types.LoggingMessageNotification:
        dropped, self.dropped = self.dropped, 0
        params = types.LoggingMessageNotificationParams(
            level="warning",
            logger="toolfold",
            data=f"{dropped:,} notifications from the upstream were dropped: the client "
            "read them slower than the upstream sent them",
        )
        return types.LoggingMessageNotification(params=params)

    async def _send(self, message: Any) -> None:
        session = self.session
        if session is None:
            return
        self._written.clear()
        try:
            with contextlib.suppress(Exception):  # the client went away
                await session.send_notification(message)
        finally:
            self._stuck_drops = 0
            self._written.set()

    async def aclose(self) -> None:
        """Stop the sender (what is still queued is not sent)."""
        if self._sender is not None:
            self._sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sender


__all__ = ["MAX_CLIENT_REQUESTS", "MAX_QUEUED", "PASSED_ON", "STALL_DROPS", "ClientLink"]
