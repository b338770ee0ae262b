"""The output of a command that outlived its call, as a call of its own.

A ``bash`` call whose command is still running after its yield settles with a handle;
the command goes on printing. ``ToolContext.follow_background(handle, command)`` asks
the harness to record that further output like any call's: once the starting call has
settled, a call of kind ``"background"`` starts (tool name ``background``, id
``<starting call id>.<handle>``, arguments ``{command, handle, started_by}``). Its sink
adopts the command's paced updates (``env.background.follow``: the whole bounded view,
exact totals, spill path), so its output reaches every subscriber as ops and, with a
durable session, is checkpointed and leased like any call's; it settles when the
command ends (exited, stopped, its timeout, idle, the environment closing).

No model asked for it: its settled entry carries ``"kind": "background"``, which a
transcript sent to a model leaves out (``toolfold agent`` does; adapters only ever see
the calls they ran), while the store, ``toolfold show``, the lanes and the viewer show
it. The exec env knows nothing of this: it only exposes the update stream and the end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from toolfold.execenv import BackgroundInfo, ExecError, OrphanReport
from toolfold.output import ToolOutput

from ._context import ToolContext
from ._durable_hooks import DurableHooks
from ._hooks import CallInfo, ExecutionHooks
from ._result import Outcome, ToolResult
from ._tool_body import Body

BACKGROUND_KIND = "background"
BACKGROUND_TOOL = "background"
"""The tool name of a background command's output call (no tool of that name runs)."""

Drive = Callable[[CallInfo, Body], Awaitable[ToolResult]]

_log = logging.getLogger("toolfold.harness")

# The tasks of the calls following a command: held here so that none is collected
# while its command runs (each ends when its command does, or with the environment).
_following: set[asyncio.Task[Any]] = set()


def background_call_id(started_by: str, handle: str) -> str:
    """The id of the call recording the output of ``handle``, started by ``started_by``
    (URL-safe when both are: the viewer addresses calls by id)."""
    return f"{started_by}.{handle}"


def _end(handle: str, end: BackgroundInfo) -> tuple[Outcome, str | None]:
    """How the call settles for how its command ended. Stopping is what was asked for,
    so it is not an error; a command that failed, was killed or was stopped by a limit
    is."""
    if end.ended == "exited":
        if end.exit_code == 0:
            return "ok", None
        return "error", f"[{handle} exited with code {end.exit_code}]"
    why = {
        "signal": "was ended by a signal",
        "stopped": "was stopped",
        "timeout": "was stopped: its timeout passed",
        "idle": "was stopped: nobody read, wrote to or signalled it for too long",
        "closed": "was stopped: its execution environment closed",
    }.get(str(end.ended), f"ended ({end.ended})")
    return ("ok" if end.ended == "stopped" else "error"), f"[{handle} {why}]"


def _body(
    follow: Callable[[Callable[[Any], None]], Awaitable[BackgroundInfo]],
    handle: str,
    started_by: str,
) -> Body:
    async def body(
        sink: ToolOutput, context: ToolContext, cancel: asyncio.Event
    ) -> tuple[Outcome, str | None]:
        sink.details.update({"handle": handle, "started_by": started_by, "running": True})
        try:
            end = await follow(sink.feed)
        except ExecError as exc:
            # An exec host that forgot the handle, or whose connection ended: the
            # output shown so far stays, with why it stops here.
            sink.details["running"] = False
            return "error", f"[{handle} is no longer followed: {exc}]"
        sink.details.update({"running": False, "exit_code": end.exit_code, "ended": end.ended})
        return _end(handle, end)

    return body


def follow_later(
    call: CallInfo,
    context: ToolContext,
    hooks: ExecutionHooks | None,
    drive: Drive,
    handle: str,
    command: str,
) -> None:
    """Start the call recording ``handle``'s output (its starting call ``call`` has
    settled). Nothing when the environment cannot follow a command."""
    start = getattr(getattr(context.env, "background", None), "follow", None)
    if not callable(start):
        return
    call_id = background_call_id(call.tool_call_id, handle)
    try:
        # Now, before anything awaits: the command is held from here on, even if a read
        # reports its end (or the environment closes) before this call has started.
        follow = start(handle, tag=call_id)
    except ExecError as exc:
        _log.warning("background command %s is not followed: %s", handle, exc)
        return
    info = CallInfo(
        call.run_id,
        call.turn_id,
        call_id,
        BACKGROUND_TOOL,
        {"command": command, "handle": handle, "started_by": call.tool_call_id},
        False,
        BACKGROUND_KIND,
    )

    async def run() -> None:
        if isinstance(hooks, DurableHooks):
            # Its own operation (and lease): it settles long after the starting run.
            await hooks.start_call(info)
        await drive(info, _body(follow, handle, call.tool_call_id))

    task = asyncio.create_task(run(), name=f"toolfold background {call_id}")
    # A loop closed with such a task still pending never runs its done callback: let
    # go of those here, so a process that runs many loops does not keep their tasks.
    _following.difference_update([t for t in _following if t.get_loop().is_closed()])
    _following.add(task)
    task.add_done_callback(_done)


async def background_settled() -> None:
    """Wait until every call recording a background command's output (in this event
    loop) has settled. They end with their commands: close the exec env first (its
    ``aclose`` stops them), then wait here before closing the store."""
    loop = asyncio.get_running_loop()
    while mine := [t for t in _following if t.get_loop() is loop and not t.done()]:
        await asyncio.wait(mine)


def orphan_notes(orphans: Iterable[OrphanReport]) -> dict[str, str]:
    """What ``resume(notes=...)`` records on the call of each background command that
    ``stop_orphans`` found a dead process had left running, keyed by the call id its
    owner tagged the command with: that it was stopped after the crash, and how."""
    notes = {}
    for o in orphans:
        if o.tag is None:
            continue
        what = (
            f"it was stopped after the crash (killed pid {', '.join(map(str, o.killed))})"
            if o.killed
            else "it had ended by itself before anything stopped it"
        )
        notes[o.tag] = (
            f"[Background command {o.handle}: process {o.owner_pid}, which followed it, "
            f"ended without stopping it; {what}.]"
        )
    return notes


def _done(task: asyncio.Task[Any]) -> None:
    _following.discard(task)
    if not task.cancelled() and task.exception() is not None:
        # Nobody awaits it: say why the output of a command stopped being recorded.
        _log.error("%s failed", task.get_name(), exc_info=task.exception())


__all__ = [
    "BACKGROUND_KIND",
    "BACKGROUND_TOOL",
    "background_call_id",
    "background_settled",
    "follow_later",
    "orphan_notes",
]
