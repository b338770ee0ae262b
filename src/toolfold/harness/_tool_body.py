"""The body of a tool call: validate its arguments, run ``execute`` as its own task, honour
``cancel`` (cooperative first, then cancelled after a grace), and say how the call ended."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from toolfold._aio import drop_event_future, event_future
from toolfold.chord import describe
from toolfold.output import ToolOutput

from ._call_checks import format_validation_error, unknown_added_tools, validation_error
from ._context import ToolContext
from ._errors import ToolError
from ._result import CANCELLED_MARKER, Outcome, error_text
from ._tools import EXECUTE_ARGS, Tool

DEFAULT_CANCEL_GRACE = 5.0
"""Seconds a tool gets to stop on its own after its ``cancel`` event is set, before
its task is cancelled."""


Body = Callable[[ToolOutput, ToolContext, asyncio.Event], Awaitable[tuple[Outcome, str | None]]]


class Interrupted(Exception):
    """The task driving a call was cancelled while the tool ran."""


def _start(tool: Tool[Any], args: tuple[Any, ...]) -> Any:
    """``tool.execute(*args)``: a coroutine, or the exception saying why it cannot be one."""
    try:
        coro = tool.execute(*args)
    except Exception as exc:  # a signature Python could not check when the tool was defined
        return exc
    if not inspect.iscoroutine(coro):
        return TypeError(f"execute returned {describe(coro)}, not a coroutine")
    return coro


def _signature_error(tool: Tool[Any], exc: BaseException) -> str:
    return error_text(
        ToolError(
            f"tool {tool.name!r} could not be started ({type(exc).__name__}: {exc}); its execute "
            f"must be 'async def execute({', '.join(EXECUTE_ARGS)}) -> None'"
        )
    )


def _returned_error(tool: Tool[Any], value: Any) -> str:
    return error_text(
        ToolError(
            f"tool {tool.name!r} returned {describe(value)} instead of None; its result is "
            "what it writes to its sink (out.write(text), out.details[...] = ...), so the "
            "returned value was not used. Write it with out.write() and return nothing"
        )
    )


def tool_body(
    tool: Tool[Any], tool_call_id: str, args: Any, grace: float, known: Collection[str] | None
) -> Body:
    async def body(
        sink: ToolOutput, context: ToolContext, cancel: asyncio.Event
    ) -> tuple[Outcome, str | None]:
        try:
            params = tool.params.model_validate(args)
        except Exception as exc:
            invalid = validation_error(exc)
            if invalid is None:
                raise
            return "invalid_arguments", format_validation_error(tool.name, invalid)
        if cancel.is_set():
            return "cancelled", CANCELLED_MARKER
        started = _start(tool, (tool_call_id, params, cancel, sink, context))
        if isinstance(started, BaseException):
            return "error", _signature_error(tool, started)
        task: asyncio.Task[Any] = asyncio.create_task(
            started, name=f"tool {tool.name} {tool_call_id}"
        )
        waiter = event_future(cancel)  # no task: the event resolves it
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():
                # Cooperative first: bash kills its process group and publishes its
                # last bounded state when it sees `cancel`.
                await asyncio.wait({task}, timeout=grace)
                if not task.done():
                    task.cancel()
                    await asyncio.wait({task})
        except asyncio.CancelledError:
            task.cancel()
            try:
                await asyncio.wait({task})
            finally:
                raise Interrupted from None
        finally:
            drop_event_future(cancel, waiter)
        if task.cancelled():
            return "cancelled", CANCELLED_MARKER
        failure = task.exception()
        if failure is not None:
            if cancel.is_set():
                return "cancelled", error_text(failure) + "\n" + CANCELLED_MARKER
            return "error", error_text(failure)
        if cancel.is_set():
            return "cancelled", CANCELLED_MARKER
        failure = sink.check_bounds()
        if failure is not None:
            return "error", error_text(failure)
        returned = task.result()
        if returned is not None:
            return "error", _returned_error(tool, returned)
        if known is not None:
            # Checked before settlement, so the transcript and the model see the same
            # error; a loop would otherwise have nothing to expose next turn.
            unknown = unknown_added_tools(sink.snapshot().get("added_tools"), known)
            if unknown is not None:
                return "error", unknown
        return "ok", None

    return body
