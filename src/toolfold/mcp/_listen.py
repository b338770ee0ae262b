"""``ListenRelay``: ``subscriptions/listen`` through the proxy (2026-07-28, SEP-2575).

On the 2026-07-28 wire there is no standing stream of server notifications: a client
sends ``subscriptions/listen`` with the kinds it wants (tools, prompts, resources list
changes, updates of named resources), and the answer is the stream. The proxy serves
it to its client with the SDK's ``ListenHandler`` over one in-process bus, fed by:

- an upstream on the 2025-era wire: its list-change and resource-update
  notifications, as they arrive;
- an upstream on the 2026-07-28 wire that announces list changes or resource
  subscriptions: one ``subscriptions/listen`` of the proxy's to it, asking for the
  three list changes and every resource its clients asked for (re-sent when that set
  grows, and after the upstream restarts).

Bounded: at most ``MAX_LISTENS`` streams to clients, each ending once
``MAX_BUFFERED`` events wait for a client that stopped reading (it listens again
and refetches: the spec has no replay), and at most ``MAX_URIS`` resources asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.subscriptions import listen
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ServerEvent,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._upstream import Upstream, UpstreamError

MAX_LISTENS = 16
"""Open ``subscriptions/listen`` streams to clients."""

MAX_BUFFERED = 256
"""Events waiting for one client stream before it is ended (as the outbox's bound)."""

MAX_URIS = 1024
"""Distinct resources the clients' streams may ask for."""


def event_of(message: Any) -> ServerEvent | None:
    """The listen event a 2025-era upstream notification stands for, if any."""
    if isinstance(message, types.ToolListChangedNotification):
        return ToolsListChanged()
    if isinstance(message, types.PromptListChangedNotification):
        return PromptsListChanged()
    if isinstance(message, types.ResourceListChangedNotification):
        return ResourcesListChanged()
    if isinstance(message, types.ResourceUpdatedNotification):
        return ResourceUpdated(uri=str(message.params.uri))
    return None


def _listens(session: ClientSession) -> bool:
    # At 2026-07-28 the SDK derives these flags from whether the server serves
    # subscriptions/listen.
    caps = session.server_capabilities
    if session.protocol_version not in MODERN_PROTOCOL_VERSIONS or caps is None:
        return False
    return bool(
        (caps.tools and caps.tools.list_changed)
        or (caps.prompts and caps.prompts.list_changed)
        or (caps.resources and (caps.resources.list_changed or caps.resources.subscribe))
    )


class ListenRelay:
    """The proxy's ``subscriptions/listen`` (see the module docstring)."""

    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.bus = InMemorySubscriptionBus()
        self.handler = ListenHandler(
            self.bus, max_subscriptions=MAX_LISTENS, max_buffered_events=MAX_BUFFERED
        )
        self._uris: set[str] = set()
        self._wanted = False
        """A client listened: keep the upstream listening (after a restart too)."""
        self._task: asyncio.Task[None] | None = None
        self._listening: tuple[ClientSession, frozenset[str]] | None = None
        upstream.on_start.append(self._started)

    async def serve(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """One client's ``subscriptions/listen``: the upstream is asked for what it
        wants, then the stream is served from the bus until the client ends it."""
        uris = set(params.notifications.resource_subscriptions or ())
        if len(self._uris | uris) > MAX_URIS:
            raise MCPError(
                types.INVALID_PARAMS,
                f"the proxy follows at most {MAX_URIS:,} resources over all listen streams",
            )
        self._uris |= uris
        self._wanted = True
        try:
            session = await self.upstream.session()
        except UpstreamError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from exc
        await self._listen_upstream(session)
        return await self.handler(ctx, params)

    async def publish(self, message: Any) -> None:
        """A 2025-era upstream's notification, to the clients' streams that want it."""
        event = event_of(message)
        if event is not None:
            await self.bus.publish(event)

    async def _started(self, session: ClientSession) -> None:
        if self._wanted:
            await self._listen_upstream(session)

    async def _listen_upstream(self, session: ClientSession) -> None:
        if not _listens(session):
            return  # a 2025-era upstream: its notifications arrive on their own
        want = (session, frozenset(self._uris))
        if self._listening == want and self._task is not None and not self._task.done():
            return
        await self._stop()
        acked = asyncio.get_running_loop().create_future()
        self._listening = want
        self._task = asyncio.create_task(self._follow(session, want[1], acked), name="mcp listen")
        # The client's stream is acknowledged once the upstream's is (or failed).
        await asyncio.wait({acked, self._task}, return_when=asyncio.FIRST_COMPLETED)

    async def _follow(
        self, session: ClientSession, uris: frozenset[str], acked: asyncio.Future[None]
    ) -> None:
        try:
            async with listen(
                session,
                tools_list_changed=True,
                prompts_list_changed=True,
                resources_list_changed=True,
                resource_subscriptions=sorted(uris),
            ) as subscription:
                acked.set_result(None)
                async for event in subscription:
                    await self.bus.publish(event)
        except Exception:
            # The upstream went away or refused: the next listen (or its restart)
            # asks again; the clients' streams stay open meanwhile.
            pass
        finally:
            if not acked.done():
                acked.set_result(None)

    async def _stop(self) -> None:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def aclose(self) -> None:
        """End the clients' streams and the upstream's."""
        self.handler.close()
        await self._stop()


__all__ = ["MAX_BUFFERED", "MAX_LISTENS", "MAX_URIS", "ListenRelay", "event_of"]
