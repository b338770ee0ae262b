"""``ProxyHost``: any MCP server's tools, with toolfold's bounds, spill files and store.

Every upstream tool is listed unchanged but for one sentence added to its
description. A call is one durable harness run of a stand-in tool whose body calls
the upstream: the result's text goes through the call's ``ToolOutput`` (so the model
gets the window and a footer), the full text goes byte-exact to a spill file, images
pass through within the sink's image bounds, ``isError`` and ``structuredContent`` are
kept (a ``structuredContent`` bigger than the window is moved to a spill file and a
note takes its place). The proxy adds ``toolfold_read`` to page through spill files;
with ``--with-builtin`` the built-in tools come too, as ``toolfold_bash`` and so on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import secrets
import time
import warnings
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from pydantic import BaseModel, ConfigDict

from toolfold._aio import drop_event_future, event_future
from toolfold._fsperm import open_owned_dir
from toolfold._units import format_bytes
from toolfold.execenv import Replace
from toolfold.harness import Tool, ToolContext, ToolError, ToolResult
from toolfold.output import OutputError, OutputPolicy, ToolOutput
from toolfold.storage import Session
from toolfold.tools import READ, builtin_tools

from ._adopt import bound_json, bound_text
from ._client_link import ClientLink
from ._host import McpHost, McpSettings, Stoppable, package_version
from ._layout import Layout, compose
from ._listen import ListenRelay
from ._passthrough import Passthrough
from ._progress import ForwardedProgress
from ._tasks import CreateTaskResult
from ._telemetry import timed_tool_call
from ._tools import WINDOW_ENDS
from ._upstream import Stopped, Upstream, UpstreamError
from ._upstream_tasks import TaskRelay, client_options

PREFIX = "toolfold_"
"""Prefix of the proxy's own tools, so they never collide with an upstream's."""

READER = f"{PREFIX}read"

META_KEY = "toolfold"
"""The key of a proxied result's ``_meta`` that holds toolfold's record of the call."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

MAX_PAGES = 1000
"""Pages of an upstream's ``tools/list`` the proxy follows (a cursor loop ends there)."""

PROXY_INSTRUCTIONS = (
    "Tools of another MCP server, through toolfold: a long result is cut to a window and "
    f"its full text kept in a spill file that `{READER}` pages through. Every call is "
    "recorded durably."
)


def proxy_note(policy: OutputPolicy) -> str:
    """The sentence each upstream tool's description gains."""
    end = WINDOW_ENDS[policy.retain]
    return (
        f"A long result is cut to a window of its {end} (at most {policy.max_lines:,} lines / "
        f"{format_bytes(policy.max_bytes)}); the full text is saved to a spill file you can "
        f"page with `{READER}`."
    )


class UpstreamArgs(BaseModel):
    """Whatever arguments the upstream tool takes (it validates them itself)."""

    model_config = ConfigDict(extra="allow")


@dataclass
class _Passed:
    """What a proxied result carries besides its text: the order of its blocks (and the
    blocks that are neither text nor image), the (possibly replaced)
    ``structuredContent``, and the upstream's ``_meta``."""

    layout: Layout
    structured: Any
    meta: dict[str, Any] | None


_SIBLING = re.compile(r"(?<![\w-])bash_(?:read|write|signal|stop|list)\b")
"""The background tools' names, as the built-in tools' descriptions mention them."""


def _served_names(tool: types.Tool) -> types.Tool:
    """``tool`` (one of the proxy's own) with the built-in tools it mentions named as the
    client sees them: ``toolfold_bash_read``, not a ``bash_read`` it cannot call."""

    def prefix(text: str) -> str:
        return _SIBLING.sub(lambda m: PREFIX + m.group(0), text)

    schema = json.loads(prefix(json.dumps(tool.input_schema)))
    description = prefix(tool.description) if tool.description is not None else None
    return tool.model_copy(update={"description": description, "input_schema": schema})


def _internal_name(name: str) -> str:
    # A Tool name is [A-Za-z][A-Za-z0-9_-]{0,63}; MCP allows dots and more.
    clean = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:60]
    return clean if clean[:1].isalpha() else f"u_{clean}"[:64]


class ProxyHost(Passthrough, McpHost):
    """An MCP server in front of one upstream MCP server (see the module docstring)."""

    spill_dir_at_start = False  # made by the first call (a client may only list tools)

    def __init__(
        self,
        session: Session,
        settings: McpSettings,
        upstream: Upstream,
        policy: OutputPolicy,
        *,
        with_builtin: bool = False,
        upstream_tasks: bool = False,
    ) -> None:
        own = builtin_tools() if with_builtin else [READ]
        settings.tools = [dataclasses.replace(t, name=f"{PREFIX}{t.name}") for t in own]
        super().__init__(session, settings)
        self.reader = READER
        self.upstream = upstream
        self.policy = policy
        self._by_name: dict[str, Tool[Any]] = {}
        self._listed: list[types.Tool] = []
        self._passed: dict[str, _Passed] = {}
        self._forwards: dict[str, ForwardedProgress] = {}
        self._subscribed: set[str] = set()
        upstream.on_start.append(self._resubscribe)
        self._tools_stale = True
        """The client holds no fresh tool list (see ``_passes``)."""
        self.client = ClientLink(passes=self._passes)
        # Sampling, elicitation and roots callbacks follow the client's capabilities
        # (``Passthrough.seen``): until a request shows them, the upstream gets none.
        self.listens = ListenRelay(upstream)
        upstream.callbacks["message_handler"] = self._notified
        upstream.gate = self.client.gate
        self.relay: TaskRelay | None = None
        if upstream_tasks:
            # 2026-07-28 toward an upstream that knows it, declaring the extension.
            upstream.modern = True
            upstream.callbacks.update(client_options())
            self.relay = TaskRelay(upstream, policy.max_bytes)
            self.tasks.relay = self.relay

    def server(self) -> Server[Any]:
        """The low-level server: tools (a slow call answered as a task, for a client
        that negotiated tasks), plus resources, prompts, completions and the log level
        passed through."""
        with warnings.catch_warnings():
            # The SDK marks the logging capability deprecated in a protocol version
            # newer than what clients speak today; the proxy forwards log messages.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server = self._server()
        self.serve_tasks(server)
        return server

    def _server(self) -> Server[Any]:
        return Server(
            "toolfold-proxy",
            version=package_version(),
            instructions=PROXY_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool_or_task,  # type: ignore[arg-type]  # a task, too
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_set_logging_level=self._set_level,
            on_completion=self._complete,
            on_subscriptions_listen=self.listens.serve,
        )

    def initialization_options(self, server: Server[Any]) -> InitializationOptions:
        # The upstream's list-change notifications are passed on (``ClientLink``).
        changed = NotificationOptions(
            prompts_changed=True, resources_changed=True, tools_changed=True
        )
        return server.create_initialization_options(changed)

    # -- tools -----------------------------------------------------------------------

    async def _upstream_tools(self) -> list[types.Tool]:
        # Every page: the proxy lists them all at once (it adds its own to the list).
        found: list[types.Tool] = []
        page = types.PaginatedRequestParams()
        for _ in range(MAX_PAGES):
            try:
                listed = await self.upstream.call(partial(ClientSession.list_tools, params=page))
            except UpstreamError as exc:
                raise MCPError(types.INTERNAL_ERROR, str(exc)) from exc
            found += listed.tools
            if not listed.next_cursor:
                return found
            page = types.PaginatedRequestParams(cursor=listed.next_cursor)
        raise MCPError(
            types.INTERNAL_ERROR,
            f"the {self.upstream.spec.describe()} listed tools on more than {MAX_PAGES} pages",
        )

    async def _refresh(self) -> None:
        note = proxy_note(self.policy)
        tools: list[types.Tool] = []
        for t in await self._upstream_tools():
            if t.name.startswith(PREFIX):
                continue  # the proxy's own names: never shadowed by an upstream tool
            own = (t.description or "").strip()
            sep = " " if own.endswith(".") else ". " if own else ""
            tools.append(t.model_copy(update={"description": f"{own}{sep}{note}"}))
            if t.name not in self._by_name:
                self._by_name[t.name] = self._stand_in(t.name)
        self._listed = tools

    async def tool_list(self) -> list[types.Tool]:
        await self._refresh()
        return [*self._listed, *(_served_names(t) for t in await super().tool_list())]

    async def resolve(self, name: str) -> Tool[Any] | None:
        own = await super().resolve(name)
        if own is not None:
            return own
        if name not in self._by_name:
            await self._refresh()
        stand_in = self._by_name.get(name)
        if stand_in is not None and stand_in.name not in self.harness.tools:
            self.harness.tools[stand_in.name] = stand_in
        return stand_in

    def _stand_in(self, upstream_name: str) -> Tool[Any]:
        host = self

        async def execute(
            tool_call_id: str,
            params: UpstreamArgs,
            cancel: Any,
            out: ToolOutput,
            context: ToolContext,
        ) -> None:
            await host._proxy_call(upstream_name, tool_call_id, params, cancel, out)

        return Tool(
            name=_internal_name(upstream_name),
            description=f"{upstream_name} on the {self.upstream.spec.describe()}",
            params=UpstreamArgs,
            execute=execute,
            output=self.policy,
        )

    def tool_named(self, name: str) -> Tool[Any] | None:
        # A task of a killed proxy, settled by this one, ran a stand-in this proxy may
        # not have made yet (it makes them as the client lists or calls tools): any
        # tool not the proxy's own is one, and its result is shaped as a proxied one.
        return super().tool_named(name) or self._stand_in(name)

    def task_handoff(self, tool: Tool[Any], call_id: str) -> asyncio.Future[Any] | None:
        if self.relay is None or tool.params is not UpstreamArgs:
            return None
        return self.relay.handoff(call_id)

    def progress_for(
        self, tool: Tool[Any], call_id: str, ctx: ServerRequestContext[Any]
    ) -> Stoppable:
        if tool.params is not UpstreamArgs:
            return super().progress_for(tool, call_id, ctx)
        forward = ForwardedProgress(ctx, self.settings.pacing)
        self._forwards[call_id] = forward
        return forward

    async def _proxy_call(
        self, name: str, call_id: str, params: UpstreamArgs, cancel: Any, out: ToolOutput
    ) -> None:
        args = dict(params.model_extra or {})
        forward = self._forwards.pop(call_id, None)
        callback = forward.update if forward is not None else None
        try:
            result = await self._upstream_result(name, call_id, args, callback, cancel)
        except UpstreamError as exc:
            raise ToolError(str(exc)) from exc
        except MCPError as exc:
            who = self.upstream.spec.describe()
            if exc.message.startswith(f"the {who} "):
                raise ToolError(exc.message) from exc  # the proxy's own words: a dropped answer
            raise ToolError(
                f"the {who} answered {name!r} with error {exc.code}: {exc.message}"
            ) from exc
        finally:
            if forward is not None:
                await forward.close()
        if result is None:
            return  # the client cancelled: the upstream was told
        self._adopt(name, call_id, result, out)
        if result.is_error:
            raise ToolError(f"the {self.upstream.spec.describe()} reported an error (isError)")

    async def _upstream_result(
        self,
        name: str,
        call_id: str,
        args: dict[str, Any],
        callback: Any,
        cancel: asyncio.Event,
    ) -> types.CallToolResult | None:
        """The upstream's answer to ``name(args)``, or ``None`` once the client cancelled
        (cancelling the SDK call sends the upstream notifications/cancelled for it)."""
        waiter = event_future(cancel)  # no task: the event resolves it
        try:
            relay = self.relay
            if relay is None:
                # In this task: the upstream call watches the cancel itself.
                try:
                    return await timed_tool_call(
                        name,
                        lambda: self.upstream.call(
                            lambda s: s.call_tool(name, args, progress_callback=callback),
                            stop=waiter,
                        ),
                    )
                except Stopped:
                    return None
            task = asyncio.ensure_future(
                timed_tool_call(name, lambda: relay.call(call_id, name, args, callback))
            )
            try:
                waits: set[asyncio.Future[Any]] = {task, waiter}
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not task.done():
                    task.cancel()
                    await asyncio.wait({task})
            return None if task.cancelled() else task.result()
        finally:
            drop_event_future(cancel, waiter)

    def _spill(self, name: str, suffix: str) -> tuple[Path, BinaryIO]:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        spill = self.settings.spill_dir.absolute()
        file = f"mcp-{_internal_name(name)}-{stamp}-{secrets.token_hex(4)}{suffix}"
        # The directory is made (0700) if missing, never through a link, as the exec env
        # makes its spill directory, and the file created in it by its descriptor.
        dir_fd = open_owned_dir(spill)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW
            fd = os.open(file, flags, 0o600, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        return spill / file, os.fdopen(fd, "wb")

    def _adopt(
        self, name: str, call_id: str, result: types.CallToolResult, out: ToolOutput
    ) -> None:
        texts: list[str] = []
        layout = Layout()
        dropped: list[str] = []
        images = 0
        for block in result.content:
            if isinstance(block, types.TextContent):
                texts.append(block.text)
                layout.add_text(block.text)
            elif isinstance(block, types.ImageContent):
                if self._adopt_image(block, out, dropped):
                    layout.slots.append(("image", images))
                    images += 1
            else:
                kept = self._adopt_block(name, block, dropped)
                if kept is not None:
                    layout.slots.append(("other", kept))
        view, layout.window_line = bound_text(
            texts, self.policy, partial(self._spill, name, ".txt")
        )
        del texts
        out.feed(Replace(view))
        layout.window = out.text
        layout.cut = view.metadata.truncation.truncated
        t = view.metadata.truncation
        spill = view.metadata.spill_path
        notes = list(dropped)
        if spill is not None and t.truncated:
            which = {"head": "first", "tail": "last"}.get(self.policy.retain, "first and last")
            notes.insert(
                0,
                f"[Showing the {which} {t.output_lines:,} of {t.total_lines:,} lines "
                f"({t.output_bytes:,} of {t.total_bytes:,} bytes). Full output: {spill}]",
            )
        structured = result.structured_content
        if structured is not None:
            size, moved = bound_json(
                structured, self.policy.max_bytes, partial(self._spill, name, ".json")
            )
            if moved is not None:
                structured = {
                    "toolfold_note": f"structuredContent of {size:,} bytes was moved to "
                    f"{moved}; page it with {READER}"
                }
                notes.append(f"[structuredContent ({size:,} bytes) saved to {moved}]")
        meta = result.meta
        if meta is not None:
            size, moved = bound_json(
                meta, self.policy.max_bytes, partial(self._spill, name, ".meta.json")
            )
            if moved is not None:
                meta = {"toolfold_note": f"_meta of {size:,} bytes was moved to {moved}"}
                notes.append(f"[_meta ({size:,} bytes) saved to {moved}]")
        if notes:
            current = out.text
            sep = "\n" if current and not current.endswith("\n") else ""
            out.footer(sep + "\n".join(notes))
        self._passed[call_id] = _Passed(layout, structured, meta)

    def _adopt_block(
        self, name: str, block: types.ContentBlock, dropped: list[str]
    ) -> types.ContentBlock | None:
        # Audio, embedded resources, links: passed on as they came unless bigger than
        # the window, then moved to a spill file (as JSON) like structuredContent.
        data = block.model_dump(by_alias=True, exclude_none=True, mode="json")
        size, moved = bound_json(data, self.policy.max_bytes, partial(self._spill, name, ".json"))
        if moved is None:
            return block
        dropped.append(f"[A {block.type} block ({size:,} bytes) was saved to {moved}]")
        return None

    def _adopt_image(self, block: types.ImageContent, out: ToolOutput, dropped: list[str]) -> bool:
        # Judged by its base64 length first: an image far over the bound is left out
        # without decoding it (which would hold a second copy).
        size = len(block.data) * 3 // 4
        if size > self.policy.max_image_bytes + 3:
            dropped.append(
                f"[An image was left out: about {size:,} bytes, over the "
                f"{self.policy.max_image_bytes:,}-byte bound for one image]"
            )
            return False
        try:
            out.image({"type": "image", "data": block.data, "mime_type": block.mime_type})
        except OutputError as exc:
            dropped.append(f"[An image was left out: {exc}]")
            return False
        return True

    def result_for(self, tool: Tool[Any], result: ToolResult, call_id: str) -> types.CallToolResult:
        passed = self._passed.pop(call_id, None)
        base = super().result_for(tool, result, call_id)
        if tool.params is not UpstreamArgs:
            return base
        # structuredContent is the upstream's (its outputSchema describes it), so
        # toolfold's own record of the call (outcome, truncation, spill file, call id,
        # session: what `toolfold mcp` puts there) goes in _meta, cut or not.
        meta = dict(passed.meta or {}) if passed else {}
        meta[META_KEY] = base.structured_content
        content = list(base.content)
        first = content[0] if content else None
        if passed is not None and isinstance(first, types.TextContent):
            content = compose(passed.layout, first.text, content[1:]) or content
        return base.model_copy(
            update={
                "content": content,
                "structured_content": passed.structured if passed else None,
                "meta": meta,
            }
        )

    # -- the client's requests ---------------------------------------------------------

    async def _list_tools(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.seen(ctx)
        # Before the upstream is asked: a change it announces after this is news.
        self._tools_stale = False
        return await super()._list_tools(ctx, params)

    async def _known(self, name: str) -> None:
        # An unknown tool's error names every tool: the upstream's, not only the ones
        # called so far.
        if await self.resolve(name) is None:
            known = ", ".join(sorted({*(t.name for t in self._listed), *self.harness.tools}))
            raise MCPError(
                types.INVALID_PARAMS, f"unknown tool {name!r}; this server offers: {known}"
            )

    async def _call_tool(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        self.seen(ctx)
        await self._known(params.name)
        return await super()._call_tool(ctx, params)

    async def _call_tool_or_task(
        self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | CreateTaskResult:
        self.seen(ctx)
        await self._known(params.name)
        return await super()._call_tool_or_task(ctx, params)

    async def _notified(self, message: Any) -> None:
        # A 2025-era client gets the notification itself; a 2026-07-28 one through
        # the subscriptions/listen streams it opened.
        await self.listens.publish(message)
        await self.client.notified(message)

    async def _passes(self, message: Any) -> bool:
        # A tools/list_changed is news only once per listing: until the client lists
        # the tools again, further ones say nothing it will not learn then (an
        # upstream that registers its tools one by one sends one per tool).
        if isinstance(message, types.ToolListChangedNotification):
            if self._tools_stale:
                return False
            self._tools_stale = True
        return True

    async def aclose(self, grace: float = 10.0) -> None:
        await super().aclose(grace)
        await self.listens.aclose()
        await self.upstream.aclose()
        await self.client.aclose()


__all__ = ["READER", "ProxyHost", "UpstreamArgs", "proxy_note"]
