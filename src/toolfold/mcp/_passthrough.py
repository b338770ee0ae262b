"""What the proxy passes between its client and the upstream as it came: resources,
prompts, completions, the log level, and the client's capabilities.

The upstream sees the proxy as a client with exactly the client's capabilities
(sampling, elicitation, roots): an upstream must not offer tools that need a
capability the real client lacks. The proxy declares ``logging`` (it forwards the
upstream's log messages, which the spec allows only a server that declares it) and
``completions``; ``logging/setLevel`` and ``completion/complete`` go to the upstream
when it declared them, and are answered here otherwise (the level is accepted, a
completion is -32601).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from ._client_link import ClientLink
from ._upstream import Upstream, UpstreamError

T = TypeVar("T")

_CAPABILITY_CALLBACKS = {
    "sampling": "sampling_callback",
    "elicitation": "elicitation_callback",
    "roots": "list_roots_callback",
}


class Passthrough:
    """The proxy's forwarding handlers (a base of ``ProxyHost``)."""

    upstream: Upstream
    client: ClientLink
    _subscribed: set[str]

    def seen(self, ctx: ServerRequestContext[Any]) -> None:
        """The client made a request: reach it on this session, and give the upstream
        (on its next start) the callbacks of the capabilities this client has."""
        self.client.seen(ctx)
        caps = ctx.session.client_capabilities
        mine = self.client.callbacks()
        for capability, name in _CAPABILITY_CALLBACKS.items():
            if caps is not None and getattr(caps, capability, None) is not None:
                self.upstream.callbacks[name] = mine[name]
            else:
                self.upstream.callbacks.pop(name, None)

    async def _forward(
        self, ctx: ServerRequestContext[Any], fn: Callable[[ClientSession], Awaitable[T]]
    ) -> T:
        self.seen(ctx)
        try:
            return await self.upstream.call(fn)
        except UpstreamError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from exc

    async def _upstream_has(self, ctx: ServerRequestContext[Any], capability: str) -> bool:
        # The upstream starts on the first request, so its capabilities are known
        # only once the session is up.
        self.seen(ctx)
        try:
            session = await self.upstream.session()
        except UpstreamError as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc)) from exc
        caps = session.server_capabilities
        return caps is not None and getattr(caps, capability, None) is not None

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return await self._forward(ctx, lambda s: s.list_resources(params=params))

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await self._forward(ctx, lambda s: s.list_resource_templates(params=params))

    async def _read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return await self._forward(ctx, lambda s: s.read_resource(params.uri))

    async def _subscribe(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        done = await self._forward(ctx, lambda s: s.subscribe_resource(params.uri))
        self._subscribed.add(params.uri)
        return done

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._subscribed.discard(params.uri)
        return await self._forward(ctx, lambda s: s.unsubscribe_resource(params.uri))

    async def _resubscribe(self, session: ClientSession) -> None:
        # A restarted upstream has forgotten the client's subscriptions: make them
        # again before any call reaches it. One it now refuses is dropped.
        for uri in sorted(self._subscribed):
            try:
                await session.subscribe_resource(uri)
            except MCPError:
                self._subscribed.discard(uri)

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return await self._forward(ctx, lambda s: s.list_prompts(params=params))

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        return await self._forward(ctx, lambda s: s.get_prompt(params.name, params.arguments))

    async def _set_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        if not await self._upstream_has(ctx, "logging"):
            return types.EmptyResult()  # nothing upstream to tell: the level is accepted
        return await self._forward(ctx, lambda s: s.set_logging_level(params.level))

    async def _complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        if not await self._upstream_has(ctx, "completions"):
            raise MCPError(
                types.METHOD_NOT_FOUND,
                f"the {self.upstream.spec.describe()} does not offer completions",
            )
        request = types.CompleteRequest(params=params)  # passed on as it came
        return await self._forward(ctx, lambda s: s.send_request(request, types.CompleteResult))


__all__ = ["Passthrough"]
