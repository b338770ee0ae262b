"""The commands for detached runs (``toolfold run --detach``): ``ps``, ``attach``,
``send`` and ``stop``, named as a shell user knows them from ``docker``."""

from __future__ import annotations

import sys

import click

from ._errors import CliError
from ._process import _arun, _check_session_name, _exit
from ._shared import CONTEXT, STORE_HELP
from ._store import resolve_store

STORE = click.option("--store", "store", metavar="URL", help=STORE_HELP)


@click.command(context_settings=CONTEXT)
@STORE
@click.option(
    "--limit",
    type=int,
    default=50,
    show_default=True,
    metavar="N",
    help="List at most N runs, the newest first (1-1000).",
)
def ps(store: str | None, limit: int) -> None:
    """List the detached runs of the store (`toolfold run --detach`): id, pid, state,
    start time and command."""
    from ._attach import ps_command

    _exit(ps_command(resolve_store(store), limit))


@click.command(context_settings=CONTEXT)
@click.argument("run_id", metavar="ID")
@STORE
def attach(run_id: str, store: str | None) -> None:
    """Follow detached run ID's output from the store until it ends; exit with its
    command's status. Ctrl-C detaches: the run goes on."""
    from ._attach import attach_command

    _check_session_name(run_id)
    spec = resolve_store(store)
    _exit(_arun(attach_command(spec, run_id), spec))


@click.command(context_settings=CONTEXT)
@click.argument("run_id", metavar="ID")
@click.argument("text", nargs=-1, metavar="[TEXT]...")
@click.option(
    "-n",
    "no_newline",
    is_flag=True,
    help="Do not add a newline after TEXT.",
)
@click.option(
    "--eof",
    is_flag=True,
    help="Then close the command's input: it reads end of file once what was sent is read.",
)
@STORE
def send(
    run_id: str, text: tuple[str, ...], no_newline: bool, eof: bool, store: str | None
) -> None:
    """Type TEXT (words joined by spaces, then a newline) into detached run ID's standard
    input; without TEXT, send what this command's own stdin holds (at most 64 KiB)."""
    from ._attach import MAX_SEND, send_command

    _check_session_name(run_id)
    if text:
        data = " ".join(text).encode() + (b"" if no_newline else b"\n")
    elif sys.stdin is None or sys.stdin.isatty():
        if not eof:
            raise CliError("nothing to send: give TEXT, pipe the input in, or use --eof")
        data = b""
    else:
        data = sys.stdin.buffer.read(MAX_SEND + 1)
    _exit(send_command(resolve_store(store), run_id, data, eof))


@click.command(context_settings=CONTEXT)
@click.argument("run_id", metavar="ID")
@click.option(
    "--time",
    "-t",
    "grace",
    type=float,
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long the run gets to wind down before every process of it is killed.",
)
@STORE
def stop(run_id: str, grace: float, store: str | None) -> None:
    """Stop detached run ID: its command gets SIGTERM (then SIGKILL) and the call settles
    as cancelled; a run still there after --time seconds is killed outright."""
    from ._attach import stop_command

    _check_session_name(run_id)
    _exit(stop_command(resolve_store(store), run_id, grace))
