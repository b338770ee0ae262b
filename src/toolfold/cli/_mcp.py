"""``toolfold mcp``: open the store and session, settle what a crash left, serve MCP."""

from __future__ import annotations

import dataclasses
import os
import secrets
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolfold._extras import missing_extra
from toolfold._units import plural
from toolfold.output import OutputPolicy

from ._errors import CliError
from ._store import StoreSpec, open_store
from ._tasks_options import TaskOptions

if TYPE_CHECKING:
    from toolfold.execenv import Sandbox
    from toolfold.storage import Session

TOKEN_ENV = "TOOLFOLD_TOKEN"
"""Environment variable holding the bearer token of ``toolfold mcp --http`` (the same one
``toolfold serve`` reads, so one exported secret serves both)."""


@dataclass(frozen=True)
class McpOptions:
    """Everything ``toolfold mcp`` was asked to do."""

    spec: StoreSpec
    session: str
    tool_specs: tuple[str, ...]
    builtin: bool
    http: bool
    bind: str
    port: int
    tasks: TaskOptions = field(default_factory=TaskOptions)
    bash_retain: str | None = None
    """``--bash-retain``: the built-in ``bash`` tool's window (``None``: its own)."""
    sandbox: Sandbox | None = None
    allow_commands: bool = False
    """Serve the tools that run commands even on a non-loopback ``bind``."""
    bash_head_share: float | None = None
    """``--head-share``: the head's share of ``bash``'s caps with ``--bash-retain
    head_tail`` (``None``: the tool's own)."""


def _with_retain(tool: Any, retain: str, head_share: float | None = None) -> Any:
    """``tool`` with its output window's mode set to ``retain`` and, when given, the
    head's share of a ``head_tail`` window to ``head_share`` (its caps kept)."""
    share = tool.output.head_share if head_share is None else head_share
    output = dataclasses.replace(tool.output, retain=retain, head_share=share)
    return dataclasses.replace(tool, output=output)


COMMAND_TOOLS = (
    "bash",
    "bash_read",
    "bash_write",
    "bash_signal",
    "bash_stop",
    "bash_list",
    "pytest",
)
"""The built-in tools that run commands or drive the ones running (pytest runs the
project's code): off over HTTP on a non-loopback address unless ``--allow-commands``,
as ``serve`` turns off posted commands there."""


def _beyond_loopback(options: McpOptions, tools: list[Any]) -> list[Any]:
    """On a non-loopback ``--host``: say so on stderr, and leave out the command tools
    unless ``--allow-commands``."""
    from ._serve import _is_loopback

    if not options.http or _is_loopback(options.bind):
        return tools
    off = [] if options.allow_commands else [t.name for t in tools if t.name in COMMAND_TOOLS]
    print(
        f"toolfold: warning: listening on {options.bind}, not only on this machine: anyone "
        "on the network who has the token can call the tools"
        + (
            f"; {', '.join(off)} (which run commands) are off: --allow-commands turns them on"
            if off
            else ", and run commands"
            if any(t.name in COMMAND_TOOLS for t in tools)
            else ""
        )
        + "; the traffic, token included, is plain HTTP",
        file=sys.stderr,
        flush=True,
    )
    kept = [t for t in tools if t.name not in off]
    if not kept:
        raise CliError(
            f"no tools left to serve on {options.bind}: the command tools are off beyond "
            "loopback; pass --allow-commands, or add tools with --tools"
        )
    return kept


def _task_settings(t: TaskOptions) -> Any:
    from toolfold.mcp import TaskSettings

    return TaskSettings(
        after=t.after,
        per_tool=t.per_tool,
        required=t.required,
        ttl_ms=t.ttl_ms,
        poll_ms=t.poll_ms,
    )


async def mcp_command(options: McpOptions) -> int:
    """Serve until the client disconnects (stdio) or a signal arrives (HTTP)."""
    try:
        from toolfold.mcp import (
            McpHost,
            McpHostError,
            McpSettings,
            load_tools,
            serve_http,
            serve_stdio,
            server_tools,
        )
    except ImportError as exc:
        raise CliError(missing_extra("toolfold mcp", "mcp", exc.name)) from exc
    try:
        tools = server_tools(load_tools(options.tool_specs), builtin=options.builtin)
        if options.bash_retain is not None:
            retain, share = options.bash_retain, options.bash_head_share
            tools = [_with_retain(t, retain, share) if t.name == "bash" else t for t in tools]
    except McpHostError as exc:
        raise CliError(str(exc)) from exc
    tools = _beyond_loopback(options, tools)
    token = os.environ.get(TOKEN_ENV) or ""
    if options.http and not token:
        token = secrets.token_urlsafe(24)
        print(
            f"toolfold: no ${TOKEN_ENV} set; this server's token is {token}",
            file=sys.stderr,
            flush=True,
        )
    spec = options.spec
    async with open_store(spec, create=True) as repo:
        session = await repo.open_session(options.session, create=True)
        settings = McpSettings(
            session_name=options.session,
            spill_dir=spec.spill_dir(options.session),
            tools=tools,
            tasks=_task_settings(options.tasks),
            sandbox=options.sandbox,
        )
        try:
            host = McpHost(session, settings, repo)
        except McpHostError as exc:
            raise CliError(str(exc)) from exc
        recovered = await host.recover()
        if recovered:
            print(
                f"toolfold: settled {plural(len(recovered), 'call')} an earlier server left unsettled "
                f"in session {options.session} as interrupted",
                file=sys.stderr,
                flush=True,
            )
        print(
            f"toolfold: MCP session {options.session} in store {spec.describe()}",
            file=sys.stderr,
            flush=True,
        )
        try:
            if options.http:
                await serve_http(host, bind=options.bind, port=options.port, token=token)
            else:
                await serve_stdio(host)
        except McpHostError as exc:
            raise CliError(str(exc)) from exc
    return 0


@dataclass(frozen=True)
class ProxyOptions:
    """Everything ``toolfold mcp proxy`` was asked to do."""

    spec: StoreSpec
    session: str
    command: tuple[str, ...]
    url: str | None
    policy: OutputPolicy
    with_builtin: bool
    max_message_bytes: int
    upstream_timeout: float | None = None
    headers: dict[str, str] | None = None
    sandbox: Sandbox | None = None
    tasks: TaskOptions = field(default_factory=TaskOptions)
    upstream_tasks: bool = False
    """``--tasks upstream``: pass the upstream's own tasks through."""


async def proxy_command(options: ProxyOptions) -> int:
    """Serve the upstream's tools over stdio until the client disconnects."""
    try:
        from toolfold.mcp import (
            McpHostError,
            McpSettings,
            ProxyHost,
            Upstream,
            UpstreamSpec,
            serve_stdio,
        )
    except ImportError as exc:
        raise CliError(missing_extra("toolfold mcp proxy", "mcp", exc.name)) from exc
    from toolfold.mcp._deferred import DeferredSession

    spec = options.spec
    async with open_store(spec, create=True) as repo:
        session: Session
        if options.session in await repo.list_sessions():
            session = await repo.open_session(options.session)
        else:
            # Created by the first call: a client that only lists tools (an inspector, a
            # health check) leaves no session behind, even if the proxy is killed.
            session = DeferredSession(repo, options.session)
        spill_dir = spec.spill_dir(options.session)
        settings = McpSettings(
            session_name=options.session,
            spill_dir=spill_dir,
            tools=[],
            tasks=_task_settings(options.tasks),
            sandbox=options.sandbox,
        )
        upstream = Upstream(
            UpstreamSpec(
                command=options.command,
                url=options.url,
                max_message_bytes=options.max_message_bytes,
                timeout=options.upstream_timeout,
                headers=dict(options.headers or {}),
            ),
            stderr_path=spill_dir.parent / f"{options.session}.upstream-stderr.log",
        )
        try:
            host = ProxyHost(
                session,
                settings,
                upstream,
                options.policy,
                with_builtin=options.with_builtin,
                upstream_tasks=options.upstream_tasks,
            )
        except McpHostError as exc:
            raise CliError(str(exc)) from exc
        recovered = await host.recover()
        if recovered:
            print(
                f"toolfold: settled {plural(len(recovered), 'call')} an earlier proxy left unsettled "
                f"in session {options.session} as interrupted",
                file=sys.stderr,
                flush=True,
            )
        print(
            f"toolfold: MCP proxy for {upstream.spec.describe()}, session {options.session} "
            f"in store {spec.describe()}",
            file=sys.stderr,
            flush=True,
        )
        try:
            await serve_stdio(host)
        finally:
            await session.close()
    return 0


__all__ = ["TOKEN_ENV", "McpOptions", "ProxyOptions", "mcp_command", "proxy_command"]
