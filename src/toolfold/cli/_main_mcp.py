"""``toolfold mcp`` and ``toolfold mcp proxy``: their options, checked up front; the
commands themselves are in ``_mcp.py``."""

from __future__ import annotations

import click

from ._errors import CliError
from ._shared import (
    CONTEXT,
    _arun,
    _check_session_name,
    _exit,
    _session_and_store,
    _window,
)
from ._store import resolve_store

MCP_SESSION_HELP = (
    "Session to record calls in (created if missing). "
    "Default: a new mcp-DATE-TIME-xxxx session per start."
)


@click.group(context_settings=CONTEXT, invoke_without_command=True)
@_session_and_store(MCP_SESSION_HELP)
@click.option(
    "--tools",
    "tool_specs",
    multiple=True,
    metavar="MODULE:ATTR",
    help="Also serve your own toolfold tools: a Tool, a list of Tools, or a function returning them (repeatable).",
)
@click.option(
    "--no-builtin", is_flag=True, help="Leave out the built-in bash, read, grep and pytest."
)
@click.option("--http", is_flag=True, help="Serve Streamable HTTP instead of stdio.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (--http)."
)
@click.option(
    "--port", default=8766, show_default=True, type=int, help="Port to listen on (--http)."
)
@click.pass_context
def mcp(
    ctx: click.Context,
    session: str | None,
    store: str | None,
    tool_specs: tuple[str, ...],
    no_builtin: bool,
    http: bool,
    host: str,
    port: int,
) -> None:
    """Serve the toolfold tools to any MCP client (stdio by default).

    Results are bounded to a window with a footer and the full output in a spill
    file (spill/SESSION/ under the store's directory) that `read` pages through;
    progress is reported while a call runs; a cancel keeps the partial output; every
    call is recorded in the store (`toolfold show SESSION`, `toolfold serve`). On
    start, calls an earlier server left unsettled in the session (a crash) are
    settled as interrupted. --http requires Authorization: Bearer $TOOLFOLD_TOKEN
    (a token is made and printed when it is unset) and checks Host and Origin.
    `toolfold mcp proxy -- COMMAND...` puts the same bounds in front of any MCP server.
    """
    if ctx.invoked_subcommand is not None:
        return
    from ._mcp import McpOptions, mcp_command

    spec = resolve_store(store)
    if not 0 < port < 65536:
        raise CliError(f"--port must be between 1 and 65535, got {port}")
    name = session if session is not None else _new_mcp_session()
    _check_session_name(name)
    options = McpOptions(spec, name, tool_specs, not no_builtin, http, host, port)
    _exit(_arun(mcp_command(options), spec))


@mcp.command("proxy", context_settings=CONTEXT)
@_session_and_store(MCP_SESSION_HELP)
@_window("head", "a long result")
@click.option(
    "--upstream-url",
    metavar="URL",
    help="Proxy a Streamable HTTP server at URL instead of running a command.",
)
@click.option(
    "--upstream-header",
    "upstream_headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="A header sent to the --upstream-url server, e.g. 'Authorization: Bearer ...' (repeatable).",
)
@click.option(
    "--with-builtin",
    is_flag=True,
    help="Also offer toolfold's built-in tools, prefixed (toolfold_bash, ...).",
)
@click.option(
    "--max-message-bytes",
    type=int,
    default=256 * 1024 * 1024,
    show_default=True,
    metavar="N",
    help="Largest upstream message read (a stdio line, an HTTP event or body); a bigger one is an error for its call, never buffered.",
)
@click.option(
    "--upstream-timeout",
    type=float,
    metavar="SECONDS",
    help="A request the upstream leaves unanswered this long is an error, and the upstream is restarted (default: no limit).",
)
@click.argument("command", nargs=-1, metavar="-- UPSTREAM_COMMAND...")
def mcp_proxy(
    session: str | None,
    store: str | None,
    retain: str,
    max_bytes: int | None,
    max_lines: int | None,
    upstream_url: str | None,
    upstream_headers: tuple[str, ...],
    with_builtin: bool,
    max_message_bytes: int,
    upstream_timeout: float | None,
    command: tuple[str, ...],
) -> None:
    """Serve any MCP server's tools (over stdio) with toolfold's bounds and records.

    Runs UPSTREAM_COMMAND as a child MCP server over stdio (or connects to
    --upstream-url) and serves its tools to the client: each result's text is cut
    to a window with a footer, its full text goes to a spill file that
    `toolfold_read` pages through, and every call is recorded in the store.
    """
    from ._mcp import ProxyOptions, proxy_command
    from ._run import output_policy

    if bool(command) == bool(upstream_url):
        raise CliError(
            "give the upstream either as a command after -- or as --upstream-url URL, not "
            f"{'both' if command else 'neither'}"
        )
    spec = resolve_store(store)
    policy = output_policy(retain, max_bytes, max_lines)
    name = session if session is not None else _new_mcp_session()
    _check_session_name(name)
    if max_message_bytes < 1024:
        raise CliError(f"--max-message-bytes must be at least 1024, got {max_message_bytes}")
    if upstream_timeout is not None and not upstream_timeout > 0:
        raise CliError(
            f"--upstream-timeout must be a number of seconds > 0, got {upstream_timeout}"
        )
    headers: dict[str, str] = {}
    for header in upstream_headers:
        key, sep, value = header.partition(":")
        if not sep or not key.strip() or any(c.isspace() for c in key.strip()):
            raise CliError(
                f"--upstream-header {header!r} is not 'NAME: VALUE', e.g. 'Authorization: Bearer abc'"
            )
        headers[key.strip()] = value.strip()
    if headers and not upstream_url:
        raise CliError("--upstream-header needs --upstream-url (a stdio upstream has no headers)")
    options = ProxyOptions(
        spec,
        name,
        command,
        upstream_url,
        policy,
        with_builtin,
        max_message_bytes,
        upstream_timeout,
        headers,
    )
    _exit(_arun(proxy_command(options), spec))


def _new_mcp_session() -> str:
    from ._run import new_session_name

    return "mcp-" + new_session_name().removeprefix("run-")
