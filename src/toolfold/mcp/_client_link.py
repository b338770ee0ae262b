"""``ClientLink``: what an upstream server sends the proxy's client, passed on unchanged.

The upstream's requests (``sampling/createMessage``, ``elicitation/create``,
``roots/list``) are asked of the client and its answer goes back; its log messages,
resource updates and list-change notifications are sent on as they came (the
``message_handler`` of the upstream's ``ClientSession`` sees them all). The link
learns the client's session from the requests the client makes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError

T = TypeVar("T")

PASSED_ON = (
    types.LoggingMessageNotification,
    types.ResourceUpdatedNotification,
    types.ResourceListChangedNotification,
    types.ToolListChangedNotification,
    types.PromptListChangedNotification,
)
"""The upstream notifications sent on to the client as they came (progress goes
with the call it reports on)."""


class ClientLink:
    """The proxy's client, as seen from the upstream (see the module docstring)."""

    def __init__(self) -> None:
        self.session: ServerSession | None = None

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
        try:
            return await ask(session)
        except MCPError as exc:
            return exc.error
        except Exception as exc:
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"the proxy's client could not answer: {exc}"
            )

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
        return await self._ask(lambda s: s.list_roots())

    async def notified(self, message: Any) -> None:
        """An upstream's notification (or transport fault): the ones in ``PASSED_ON``
        are sent on unchanged."""
        session = self.session
        if session is not None and isinstance(message, PASSED_ON):
            with contextlib.suppress(Exception):  # the client went away
                await session.send_notification(message)


__all__ = ["PASSED_ON", "ClientLink"]
