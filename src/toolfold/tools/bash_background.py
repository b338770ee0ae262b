"""Tools for commands ``bash`` left running in the background: ``bash_read``,
``bash_write``, ``bash_signal``, ``bash_stop`` and ``bash_list``.

Each works on a handle (``bg-1``, ...) from a ``bash`` result. What they show is
bounded like every command output: a read is the window (50 KiB / 2,000 lines, the
end kept) of exactly the bytes the command printed since the previous read, with
their exact size and where they start in the full output, which the spill file
named in the footer holds byte for byte.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from pydantic import BaseModel, Field

from toolfold._units import format_bytes
from toolfold.execenv import (
    BackgroundRead,
    ExecError,
    Replace,
    ShellOutputMetadata,
    ShellOutputView,
)
from toolfold.harness import Tool, ToolContext, ToolError
from toolfold.output import OutputPolicy, ToolOutput

from .bash import MAX_YIELD

BACKGROUND_OUTPUT = OutputPolicy(retain="tail")

_HANDLE = Field(description='The handle from the bash result, e.g. "bg-1".')
_UNTIL = Field(
    default=None,
    description="Return as soon as this text appears in the new output (plain text, not a "
    "regular expression).",
)


class BashReadParams(BaseModel):
    """Arguments of the ``bash_read`` tool."""

    handle: str = _HANDLE
    wait: float = Field(
        default=0.0,
        ge=0,
        le=MAX_YIELD,
        description="Seconds to wait for more output first; returns early when the command "
        "ends or `until` appears (default 0: what is there now).",
    )
    until: str | None = _UNTIL


class BashWriteParams(BaseModel):
    """Arguments of the ``bash_write`` tool."""

    handle: str = _HANDLE
    input: str = Field(
        description='Text to send to its stdin; end a line with "\\n" to submit it '
        "(at most 64 KiB).",
    )
    eof: bool = Field(default=False, description="Then close its input (Ctrl-D on a terminal).")
    wait: float = Field(
        default=1.0,
        ge=0,
        le=MAX_YIELD,
        description="Seconds to wait for its answer; returns early when it ends or `until` "
        "appears (default 1).",
    )
    until: str | None = _UNTIL


class BashSignalParams(BaseModel):
    """Arguments of the ``bash_signal`` tool."""

    handle: str = _HANDLE
    signal: str = Field(
        default="INT",
        description="INT (Ctrl-C), TERM, HUP, QUIT, KILL, USR1, USR2, CONT, STOP or WINCH.",
    )
    wait: float = Field(
        default=1.0,
        ge=0,
        le=MAX_YIELD,
        description="Seconds to wait for its reaction; returns early when it ends (default 1).",
    )


class BashStopParams(BaseModel):
    """Arguments of the ``bash_stop`` tool."""

    handle: str = _HANDLE


class BashListParams(BaseModel):
    """Arguments of the ``bash_list`` tool (none)."""


def _background(context: ToolContext) -> Any:
    background = getattr(context.env, "background", None)
    if background is None:
        raise ToolError(
            "this execution environment runs no background commands; start one with bash "
            "(a command still running after yield_after seconds goes on in the background)"
        )
    return background


def _state(read: BackgroundRead) -> str:
    if read.running:
        return f"{read.handle} is still running"
    if read.ended == "exited":
        return f"{read.handle} exited with code {read.exit_code}"
    why = {
        "signal": "was ended by a signal",
        "stopped": "was stopped",
        "timeout": "was stopped: its timeout passed",
        "idle": "was stopped: nobody read it for too long",
        "closed": "was stopped: the execution environment closed",
    }
    return f"{read.handle} {why.get(read.ended or '', 'ended')}"


def show_read(out: ToolOutput, read: BackgroundRead) -> None:
    """Put one read into the sink: the window of the new output, a footer saying what it
    is, and the details a program needs."""
    t = read.truncation
    out.feed(
        Replace(
            ShellOutputView(
                text=read.text,
                metadata=ShellOutputMetadata(
                    truncation=t, spill_path=read.spill_path, spill_note=read.spill_note
                ),
            )
        )
    )
    end = read.offset + t.total_bytes
    if t.total_bytes == 0:
        new = "No new output"
    elif t.truncated:
        new = (
            f"New output: bytes {read.offset:,}-{end:,}, showing the last "
            f"{format_bytes(t.output_bytes)} of {format_bytes(t.total_bytes)}"
        )
        if read.spill_path:
            new += f"; all of it is in {read.spill_path} from byte {read.offset:,}"
    else:
        new = f"New output: {format_bytes(t.total_bytes)}"
    note = f"[{new}. {_state(read)} ({format_bytes(read.total_bytes)} of output in all).]"
    if read.written is not None:
        note = f"[Sent {format_bytes(read.written)}.] " + note
    text = out.text
    out.footer(("\n" if text and not text.endswith("\n") else "") + note)
    out.details.update(
        {
            "handle": read.handle,
            "running": read.running,
            "exit_code": read.exit_code,
            "ended": read.ended,
            "offset": read.offset,
            "new_bytes": t.total_bytes,
            "total_bytes": read.total_bytes,
        }
    )


async def _run(out: ToolOutput, call: Any) -> None:
    try:
        read = await call
    except ExecError as exc:
        raise ToolError(str(exc)) from exc
    show_read(out, read)


async def bash_read(
    tool_call_id: str,
    params: BashReadParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Show what a background command (a handle from bash) printed since the last read,
    and whether it still runs. Long new output keeps its end; the footer says where the
    full output is."""
    background = _background(context)
    await _run(out, background.read(params.handle, wait=params.wait, until=params.until))


async def bash_write(
    tool_call_id: str,
    params: BashWriteParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Send input to a background command (answer a prompt, type into a REPL), then show
    its new output."""
    background = _background(context)
    await _run(
        out,
        background.write(
            params.handle, params.input, eof=params.eof, wait=params.wait, until=params.until
        ),
    )


async def bash_signal(
    tool_call_id: str,
    params: BashSignalParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Send a signal to a background command's processes (INT is Ctrl-C), then show its
    new output."""
    background = _background(context)
    await _run(out, background.signal(params.handle, params.signal, wait=params.wait))


async def bash_stop(
    tool_call_id: str,
    params: BashStopParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Stop a background command and every process it started; show its last output."""
    background = _background(context)
    await _run(out, background.stop(params.handle))


async def bash_list(
    tool_call_id: str,
    params: BashListParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """List the background commands: handle, state, unread output, command."""
    background = _background(context)
    infos = background.commands()
    if inspect.isawaitable(infos):  # a remote environment asks its exec host
        infos = await infos
    if not infos:
        out.write("No background commands.\n")
    for info in infos:
        state = "running" if info.running else f"ended ({info.ended})"
        out.write(
            f"{info.handle}\t{state}\tpid {info.pid}\t{format_bytes(info.unread_bytes)} unread"
            f"{chr(9) + 'tty' if info.tty else ''}\t{info.command[:200]}\n"
        )
    out.details["commands"] = [
        {
            "handle": i.handle,
            "running": i.running,
            "pid": i.pid,
            "command": i.command[:200],
            "unread_bytes": i.unread_bytes,
            "total_bytes": i.total_bytes,
            "tty": i.tty,
        }
        for i in infos
    ]


def _tool(fn: Any, params: type[BaseModel]) -> Tool[Any]:
    return Tool(
        name=fn.__name__,
        description=(fn.__doc__ or "").replace("\n    ", " ").strip(),
        params=params,
        execute=fn,
        output=BACKGROUND_OUTPUT,
        replay_safe=False,
    )


BASH_READ = _tool(bash_read, BashReadParams)
BASH_WRITE = _tool(bash_write, BashWriteParams)
BASH_SIGNAL = _tool(bash_signal, BashSignalParams)
BASH_STOP = _tool(bash_stop, BashStopParams)
BASH_LIST = _tool(bash_list, BashListParams)
BACKGROUND_TOOLS = [BASH_READ, BASH_WRITE, BASH_SIGNAL, BASH_STOP, BASH_LIST]
"""The tools for background commands, in the order they are offered."""
