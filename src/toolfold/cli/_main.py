"""The click command group behind ``toolfold`` (its entry point ``main`` is in ``_entry.py``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from ._errors import CliError
from ._process import _arun, _check_session_name, _exit
from ._sandbox import sandbox_choice, sandbox_options, store_paths
from ._shared import CONTEXT, SIZE, STORE_HELP, _session_and_store, _window
from ._store import resolve_store

LAZY_COMMANDS = {
    "mcp": ("._main_mcp", "mcp"),
    "ps": ("._main_detach", "ps"),
    "attach": ("._main_detach", "attach"),
    "send": ("._main_detach", "send"),
    "stop": ("._main_detach", "stop"),
}
"""Commands defined on first use: name -> (module relative to this package, the click
command's attribute in it). Building their many options is work a ``run`` or ``show``
would otherwise pay on every start; ``--help`` still lists them."""


class _Commands(click.Group):
    """The command group, with the commands of ``LAZY_COMMANDS`` defined on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = LAZY_COMMANDS.get(cmd_name)
        if where is not None and cmd_name not in self.commands:
            module = f"{__package__}{where[0]}"
            __import__(module)  # an import statement's path: -X importtime reports it
            command = getattr(sys.modules[module], where[1])
            assert isinstance(command, click.Command)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Commands, context_settings=CONTEXT)
@click.version_option(package_name="toolfold", prog_name="toolfold")
def cli() -> None:
    """toolfold: bounded, streamed, durable tool output for agent harnesses.

    Run a shell command as a durable tool call (`toolfold run -- make`), list and
    inspect what the store holds (`sessions`, `show`), finish calls a crash left
    unsettled (`resume`), watch calls live in a browser (`serve`), or take the tour
    (`demo`). `run --detach` starts a run that outlives the shell; `ps`, `attach`,
    `send` and `stop` list, follow, type into and stop such runs. `run --ssh HOST` runs the command on another machine, where
    `exec-host` is its far end. `agent "task"` runs the reference agent loop on
    any OpenAI-compatible endpoint.
    """


@cli.command(context_settings=CONTEXT)
@_session_and_store(
    "Session to record the call in (created if missing). Default: a new run-DATE-TIME-xxxx session."
)
@_window("tail", "long output")
@click.option(
    "--max-spill",
    **SIZE,
    help="Cap of the spill file holding the full output: bytes, or with K, M or G (default 1G).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the settled result message as JSON instead of its text.",
)
@click.option(
    "--ssh",
    "ssh",
    metavar="DEST",
    help="Run the command on DEST (user@host or an ssh config alias) through `toolfold exec-host` there.",
)
@click.option(
    "--ssh-option",
    "ssh_options",
    multiple=True,
    metavar="ARGS",
    help="Extra ssh arguments for --ssh, split like a shell would (repeatable), e.g. '-p 2222'.",
)
@click.option(
    "--exec-host",
    "exec_host_prefix",
    metavar="PREFIX",
    help="Run the command through PREFIX + `toolfold exec-host`, e.g. 'docker exec -i CONTAINER'.",
)
@click.option(
    "--remote-command",
    metavar="CMD",
    default="toolfold exec-host",
    show_default=True,
    help="What --ssh / --exec-host runs on the other side (a full path when toolfold is not on its PATH).",
)
@click.option(
    "--remote-cwd",
    metavar="DIR",
    help="Working directory on the other side (default: where the exec host starts, the login directory for ssh).",
)
@click.option(
    "--lease",
    "lease",
    type=float,
    metavar="SECONDS",
    help="Lease of the call (default 10): renewed while it runs; once it expired (this "
    "process died), `toolfold serve --resume-orphans` on the store settles the call.",
)
@sandbox_options("off", "the command (here, or on the exec host)")
@click.option(
    "--detach",
    "-d",
    is_flag=True,
    help="Start the run in a process of its own and return at once, printing its id "
    "(its session): `toolfold attach ID` follows it, `send ID TEXT` types a line to it, "
    "`stop ID` stops it, `ps` lists detached runs.",
)
@click.option(
    "--detached-worker",
    "detached_worker",
    type=int,
    hidden=True,
    help="Internal: how --detach starts the run's own process (FD: its ready pipe).",
)
@click.argument("command", nargs=-1, required=True, metavar="-- COMMAND...")
def run(
    session: str | None,
    store: str | None,
    retain: str,
    head_share: float | None,
    max_bytes: int | None,
    max_lines: int | None,
    max_spill: int | None,
    as_json: bool,
    ssh: str | None,
    ssh_options: tuple[str, ...],
    exec_host_prefix: str | None,
    remote_command: str,
    remote_cwd: str | None,
    lease: float | None,
    sandbox_profile: str,
    sandbox_write: tuple[str, ...],
    sandbox_network: bool,
    detach: bool,
    detached_worker: int | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND as a durable `bash` tool call and print what a model would receive.

    The output is bounded to a window (tail by default); the full output goes to a
    spill file under the store's directory (spill/SESSION/). Progress is checkpointed
    into the store while it runs. On a terminal a live view shows the window and a
    status line. The exit status is the command's; Ctrl-C cancels the command, keeps
    its partial output, settles the call as cancelled and exits 130. With --ssh or
    --exec-host the command runs on another machine or in a container, bounded there
    (spill files stay there); only the window crosses the connection. --sandbox
    confines the command (there, for --ssh / --exec-host); see docs/security.md.
    --detach runs it in the background of the machine, outliving this shell.
    """
    from ._run import run_command

    run_command(
        session=session,
        store=store,
        retain=retain,
        head_share=head_share,
        max_bytes=max_bytes,
        max_lines=max_lines,
        max_spill=max_spill,
        as_json=as_json,
        ssh=ssh,
        ssh_options=ssh_options,
        exec_host_prefix=exec_host_prefix,
        remote_command=remote_command,
        remote_cwd=remote_cwd,
        lease=lease,
        sandbox_profile=sandbox_profile,
        sandbox_write=sandbox_write,
        sandbox_network=sandbox_network,
        detach=detach,
        detached_worker=detached_worker,
        command=command,
    )


@cli.command(context_settings=CONTEXT)
@click.option("--store", "store", metavar="URL", help=STORE_HELP)
def sessions(store: str | None) -> None:
    """List the sessions in the store, with how many calls each holds and how many of
    them are unsettled."""
    from ._inspect import sessions_command

    spec = resolve_store(store)
    _exit(_arun(sessions_command(spec), spec))


@cli.command(context_settings=CONTEXT)
@click.argument("session_name", metavar="SESSION")
@click.argument("call", required=False, metavar="[CALL]")
@click.option("--store", "store", metavar="URL", help=STORE_HELP)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON (the settled message, or the recovered state).",
)
@click.option(
    "--save-images",
    "save_images",
    metavar="DIR",
    type=click.Path(path_type=Path, file_okay=False),
    help="Also write CALL's images to DIR as CALL-N.png etc. (files 0600; never overwrites).",
)
def show(
    session_name: str,
    call: str | None,
    store: str | None,
    as_json: bool,
    save_images: Path | None,
) -> None:
    """List the calls of SESSION, or show one CALL (its number, id, or an id prefix).

    A settled call prints its model-visible result; an unsettled one prints the
    pending output recovered from its last durable checkpoint. A result that holds
    images says so (`[2 images: image/png 34 KiB, ...]`, on stderr);
    --save-images writes them to files.
    """
    from ._inspect import show_command

    spec = resolve_store(store)
    _check_session_name(session_name)
    _exit(_arun(show_command(spec, session_name, call, as_json, save_images), spec))


@cli.command(context_settings=CONTEXT)
@click.argument("session_name", metavar="SESSION")
@click.option("--store", "store", metavar="URL", help=STORE_HELP)
def resume(session_name: str, store: str | None) -> None:
    """Finish the calls of SESSION that a crash left unsettled.

    Replay-safe tools are re-run with their output seeded from the state committed
    with their last memo; other tools (bash) are settled from their last checkpoint
    with the interruption marker; an assistant message is settled as interrupted,
    keeping its text. A `toolfold agent` run that had not ended then continues from
    there. Refuses while the call's process still runs.
    """
    from ._inspect import resume_command

    spec = resolve_store(store)
    _check_session_name(session_name)
    _exit(_arun(resume_command(spec, session_name), spec))


@cli.command(context_settings=CONTEXT)
@click.argument("task")
@click.option("--model", required=True, metavar="NAME", help="Model name the endpoint serves.")
@click.option(
    "--base-url",
    metavar="URL",
    envvar="OPENAI_BASE_URL",
    help="An OpenAI-compatible Chat Completions endpoint, e.g. http://127.0.0.1:8000/v1 "
    "for vLLM, llama.cpp or Ollama (default: $OPENAI_BASE_URL, else OpenAI's). "
    "The key comes from $OPENAI_API_KEY.",
)
@click.option("--system", metavar="TEXT", help="A system prompt.")
@click.option(
    "--max-turns",
    type=int,
    default=20,
    show_default=True,
    metavar="N",
    help="Stop after N model turns (an endless tool loop ends there).",
)
@click.option(
    "--session",
    "session",
    metavar="NAME",
    help="Session to record the run in. Default: a new agent-DATE-TIME-xxxx session.",
)
@click.option("--store", "store", metavar="URL", help=STORE_HELP)
@sandbox_options("workspace-write", "the commands the model runs")
def agent(
    task: str,
    model: str,
    base_url: str | None,
    system: str | None,
    max_turns: int,
    session: str | None,
    store: str | None,
    sandbox_profile: str,
    sandbox_write: tuple[str, ...],
    sandbox_network: bool,
) -> None:
    """Run TASK with the reference agent loop: model -> tools -> model.

    The answer streams to the terminal with its tool calls (bash, read, grep,
    pytest) under it; every message and call is durable in SESSION, so after a
    crash `toolfold resume SESSION` settles what was cut and continues the run.
    """
    from ._agent import AgentSettings, agent_command
    from ._run import new_session_name

    choice = sandbox_choice(sandbox_profile, sandbox_write, sandbox_network)
    spec = resolve_store(store)
    name = session if session is not None else "agent-" + new_session_name().removeprefix("run-")
    _check_session_name(name)
    choice.build(hidden=store_paths(spec))  # a host that cannot confine fails here, up front
    settings = AgentSettings(spec, name, task, model, base_url, system, max_turns, choice)
    _exit(_arun(agent_command(settings), spec))


@cli.command(context_settings=CONTEXT)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=int, help="Port to listen on.")
@click.option("--store", "store", metavar="URL", help=STORE_HELP)
@click.option(
    "--token",
    metavar="TOKEN",
    envvar="TOOLFOLD_TOKEN",
    help="The secret every request must carry (default: $TOOLFOLD_TOKEN, else a random "
    "one, printed in the viewer URL at start).",
)
@click.option(
    "--allow-host",
    "allow_host",
    metavar="NAME",
    multiple=True,
    help="Also accept requests whose Host is NAME (repeatable); localhost, 127.0.0.1, "
    "[::1] and --host are always accepted.",
)
@click.option(
    "--allow-commands",
    is_flag=True,
    help="Run posted commands even when --host is not a loopback address "
    "(anyone on the network with the token can then run commands).",
)
@click.option(
    "--resume-orphans",
    "resume_orphans",
    is_flag=True,
    help="Also settle, continuously, the calls of dead processes in every session of the "
    "store (their lease expired): checks every half --lease.",
)
@click.option(
    "--lease",
    "lease",
    type=float,
    metavar="SECONDS",
    help="With --resume-orphans: the lease it takes on a call it settles, and twice the "
    "interval between its checks (default 10).",
)
def serve(
    host: str,
    port: int,
    store: str | None,
    token: str | None,
    allow_host: tuple[str, ...],
    allow_commands: bool,
    resume_orphans: bool,
    lease: float | None,
) -> None:
    """Serve the live web viewer and its API (SSE lanes, commands, stored sessions).

    Open the http://HOST:PORT/?token=... URL it prints in a browser; every request
    needs that token (docs/security.md). A command posted to lane L runs as a durable
    bash call in session L of the store (created on first use; spill files under the
    store's directory, spill/L/), so `toolfold show L` lists it and it survives a
    restart. The viewer also shows any stored session's calls. On a non-loopback
    --host, commands are off unless --allow-commands. With --resume-orphans it also
    settles the calls of processes that died (any host's `toolfold run` whose lease
    expired), so many hosts on one PostgreSQL need nobody to run `toolfold resume`.
    Ctrl-C stops.
    """
    from ._run import lease_seconds
    from ._serve import ServeOptions, serve_command

    spec = resolve_store(store)
    if not 0 < port < 65536:
        raise CliError(f"--port must be between 1 and 65535, got {port}")
    if lease is not None and not resume_orphans:
        raise CliError("--lease applies to --resume-orphans; add --resume-orphans or drop --lease")
    options = ServeOptions.checked(
        host,
        port,
        token,
        allow_host,
        allow_commands,
        lease_seconds(lease) if resume_orphans else None,
    )
    _exit(_arun(serve_command(spec, options), spec))


@cli.command(context_settings=CONTEXT)
@click.option(
    "--dir",
    "directory",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="Where to put the demo's store (default: .toolfold/demo here, kept so you can look and replaced by the next run).",
)
def demo(directory: str | None) -> None:
    """A short tour on a SQLite store of its own: a long build log cut to a tail window
    with a spill file, the pytest tool's live details, a failing command keeping its
    partial output, and a kill -9 and resume of a memoising tool."""
    from ._demo import demo_command

    _exit(_arun(demo_command(directory)))


@cli.command("exec-host", context_settings=CONTEXT)
@click.option(
    "--spill-dir",
    default="~/.toolfold/spill",
    show_default=True,
    metavar="DIR",
    help="Where spill files go on this machine unless a request names a directory.",
)
@sandbox_options("off", "the commands this host runs")
def exec_host(
    spill_dir: str, sandbox_profile: str, sandbox_write: tuple[str, ...], sandbox_network: bool
) -> None:
    """Run commands for a remote toolfold (`toolfold run --ssh HOST`, RemoteExecEnv).

    Speaks JSON lines on stdin/stdout: bounded output updates go out, the full output
    stays here in spill files. Not for interactive use: ssh, docker exec -i and the like
    start it. When stdin closes, every command it runs is killed and it exits.
    `toolfold run --sandbox ...` with --ssh / --exec-host passes its sandbox options here.
    """
    from toolfold.execenv import run_exec_host

    choice = sandbox_choice(sandbox_profile, sandbox_write, sandbox_network)
    # The spill files of every session stay out of the commands' reach.
    sandbox = choice.build(hidden=[os.path.expanduser(spill_dir)])
    _exit(run_exec_host(spill_dir, sandbox=sandbox))
