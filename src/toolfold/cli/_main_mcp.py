"""``toolfold mcp`` and ``toolfold mcp proxy``: their options, checked up front; the
commands themselves are in ``_mcp.py``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ._errors import CliError
from ._process import _arun, _check_session_name, _exit
from ._sandbox import sandbox_choice, sandbox_options, store_paths
from ._shared import CONTEXT, SIZE, _session_and_store, _window, head_share_option
from ._store import resolve_store
from ._tasks_options import TaskOptions

F = TypeVar("F", bound=Callable[..., Any])


def task_options(f: F) -> F:
    """``--task-after``, ``--task-ttl`` and ``--task-poll``: ``toolfold mcp`` and its
    proxy share them."""
    for option in reversed(_TASK_OPTIONS):
        f = option(f)
    return f


_TASK_OPTIONS = [
    click.option(
        "--task-after",
        "task_after",
        multiple=True,
        metavar="SECONDS|TOOL=SECONDS|TOOL=never|TOOL=required",
        help="For a client that negotiated the tasks extension: a call still running after SECONDS (default 1; 0: at once) is answered with a task; TOOL=... sets it for one tool (repeatable): TOOL=never keeps it out of tasks, TOOL=required makes every call of it a task and refuses it (-32021) to a client without the extension.",
    ),
    click.option(
        "--task-ttl",
        type=float,
        default=3600.0,
        show_default=True,
        metavar="SECONDS",
        help="How long an ended task (and its spill file) is kept from its creation.",
    ),
    click.option(
        "--task-poll",
        type=float,
        default=1.0,
        show_default=True,
        metavar="SECONDS",
        help="The polling interval a task suggests to the client.",
    ),
]

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
@click.option(
    "--bash-retain",
    type=click.Choice(["head", "tail", "head_tail"]),
    help="Window of the built-in bash tool's output (default: tail); head_tail keeps the start and the end.",
)
@head_share_option("--bash-retain")
@click.option("--http", is_flag=True, help="Serve Streamable HTTP instead of stdio.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (--http)."
)
@click.option(
    "--port", default=8766, show_default=True, type=int, help="Port to listen on (--http)."
)
@task_options
@sandbox_options("workspace-write", "the commands a client runs (bash, pytest)")
@click.option(
    "--allow-commands",
    is_flag=True,
    help="Serve bash, its background tools and pytest even when --host is not a loopback address "
    "(off by default there: anyone on the network with the token could run commands).",
)
@click.pass_context
def mcp(
    ctx: click.Context,
    session: str | None,
    store: str | None,
    tool_specs: tuple[str, ...],
    no_builtin: bool,
    bash_retain: str | None,
    head_share: float | None,
    http: bool,
    host: str,
    port: int,
    task_after: tuple[str, ...],
    task_ttl: float,
    task_poll: float,
    sandbox_profile: str,
    sandbox_write: tuple[str, ...],
    sandbox_network: bool,
    allow_commands: bool,
) -> None:
    """Serve the toolfold tools to any MCP client (stdio by default).

    Results are bounded to a window with a footer and the full output in a spill
    file (spill/SESSION/ under the store's directory) that `read` pages through;
    progress is reported while a call runs; a cancel keeps the partial output; every
    call is recorded in the store (`toolfold show SESSION`, `toolfold serve`). On
    start, calls an earlier server left unsettled in the session (a crash) are
    settled as interrupted. --http requires Authorization: Bearer $TOOLFOLD_TOKEN
    (a token is made and printed when it is unset) and checks Host and Origin; on a
    non-loopback --host, the tools that run commands are off unless --allow-commands.
    `toolfold mcp proxy -- COMMAND...` puts the same bounds in front of any MCP server.
    Commands run in the workspace-write sandbox unless --sandbox says otherwise
    (docs/security.md).
    """
    if ctx.invoked_subcommand is not None:
        return
    from ._mcp import McpOptions, mcp_command
    from ._run import head_share_value

    choice = sandbox_choice(sandbox_profile, sandbox_write, sandbox_network)
    spec = resolve_store(store)
    if not 0 < port < 65536:
        raise CliError(f"--port must be between 1 and 65535, got {port}")
    name = session if session is not None else _new_mcp_session()
    _check_session_name(name)
    tasks = _task_options(task_after, task_ttl, task_poll)
    bash_head_share = (
        None if head_share is None else head_share_value(head_share, bash_retain, "--bash-retain")
    )
    sandbox = choice.build(hidden=store_paths(spec))
    options = McpOptions(
        spec,
        name,
        tool_specs,
        not no_builtin,
        http,
        host,
        port,
        tasks,
        bash_retain,
        sandbox,
        allow_commands,
        bash_head_share,
    )
    _exit(_arun(mcp_command(options), spec))


def _seconds(text: str, what: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise CliError(f"{what} must be a number of seconds >= 0, got {text!r}")
    return seconds


def _task_options(after: tuple[str, ...], ttl: float, poll: float) -> TaskOptions:
    """``--task-after``/``--task-ttl``/``--task-poll``, checked."""
    default = 1.0
    per_tool: dict[str, float | None] = {}
    required: set[str] = set()
    for item in after:
        tool, sep, value = item.rpartition("=")
        if not sep:
            default = _seconds(value, "--task-after")
        elif not tool:
            raise CliError(f"--task-after {item!r}: give TOOL=SECONDS or TOOL=never")
        else:
            required.discard(tool)
            if value == "required":
                required.add(tool)
            else:
                per_tool[tool] = (
                    None if value == "never" else _seconds(value, f"--task-after {tool}")
                )
    if not (ttl * 1000 >= 1 and poll * 1000 >= 1) or ttl == float("inf"):
        raise CliError(
            f"--task-ttl and --task-poll must be at least 0.001 seconds, got {ttl} and {poll}"
        )
    return TaskOptions(
        default, per_tool, frozenset(required), round(ttl * 1000), round(poll * 1000)
    )


@mcp.command(
    "proxy",
    # Options end at the first word that is not one (or at --): what follows is the
    # upstream's command line, its own options included. Some clients (the MCP
    # Inspector) drop a `--` from a server's arguments.
    context_settings={**CONTEXT, "allow_interspersed_args": False},
)
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
    default="256M",
    show_default=True,
    **SIZE,
    help="Largest upstream message read (a stdio line, an HTTP event or body); a bigger one is an error for its call, never buffered.",
)
@click.option(
    "--upstream-timeout",
    type=float,
    metavar="SECONDS",
    help="A request the upstream leaves unanswered this long is an error, and the upstream is restarted (default: no limit).",
)
@click.option(
    "--tasks",
    "task_source",
    type=click.Choice(["own", "upstream"]),
    default="own",
    show_default=True,
    help="own: a slow upstream call becomes the proxy's own durable task; upstream: "
    "speak 2026-07-28 to the upstream and pass its own tasks through (bounded), own "
    "tasks for an upstream without them.",
)
@task_options
@sandbox_options("workspace-write", "the commands of the built-in tools (--with-builtin)")
@click.argument("command", nargs=-1, metavar="[--] UPSTREAM_COMMAND...")
def mcp_proxy(
    session: str | None,
    store: str | None,
    retain: str,
    head_share: float | None,
    max_bytes: int | None,
    max_lines: int | None,
    upstream_url: str | None,
    upstream_headers: tuple[str, ...],
    with_builtin: bool,
    max_message_bytes: int,
    upstream_timeout: float | None,
    task_source: str,
    task_after: tuple[str, ...],
    task_ttl: float,
    task_poll: float,
    sandbox_profile: str,
    sandbox_write: tuple[str, ...],
    sandbox_network: bool,
    command: tuple[str, ...],
) -> None:
    """Serve any MCP server's tools (over stdio) with toolfold's bounds and records.

    Runs UPSTREAM_COMMAND as a child MCP server over stdio (or connects to
    --upstream-url) and serves its tools to the client (the command starts at the
    first word that is not an option of the proxy's, or after --): each result's text is cut
    to a window with a footer, its full text goes to a spill file that
    `toolfold_read` pages through, and every call is recorded in the store.
    The upstream server runs unconfined; --sandbox confines the commands of the
    built-in tools that --with-builtin adds.
    """
    from ._mcp import ProxyOptions, proxy_command
    from ._run import output_policy

    choice = sandbox_choice(sandbox_profile, sandbox_write, sandbox_network)

    if bool(command) == bool(upstream_url):
        raise CliError(
            "give the upstream either as a command after -- or as --upstream-url URL, not "
            f"{'both' if command else 'neither'}"
        )
    spec = resolve_store(store)
    policy = output_policy(retain, max_bytes, max_lines, head_share)
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
    # Without --with-builtin no command runs here (toolfold_read only pages spill files).
    sandbox = choice.build(hidden=store_paths(spec)) if with_builtin else None
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
        sandbox,
        _task_options(task_after, task_ttl, task_poll),
        task_source == "upstream",
    )
    _exit(_arun(proxy_command(options), spec))


def _new_mcp_session() -> str:
    from ._run import new_session_name

    return "mcp-" + new_session_name().removeprefix("run-")
