"""Waiting for an ``asyncio.Event`` without a task.

``asyncio.Event`` has no callback API: the usual way to wait for one beside other
futures (``asyncio.wait({work, asyncio.ensure_future(event.wait())})``) creates a task,
which costs a task, its first step and its cancellation: a few loop turns on a path
that runs once per tool call. :func:`event_future` gives a plain future that the
event's ``set()`` resolves, the way ``Event.wait()`` itself waits (a future among the
event's waiters); :func:`drop_event_future` stops waiting and takes it out of the
event's waiters, so an event that is never set does not collect them.

Imports nothing else from toolfold.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib

__all__ = ["drop_event_future", "event_future"]


def event_future(event: asyncio.Event) -> asyncio.Future[bool]:
    """A future resolved with ``True`` when ``event`` is set (at once if it already is).
    Release it with :func:`drop_event_future` once it is no longer waited for."""
    loop = asyncio.get_running_loop()
    waiters = getattr(event, "_waiters", None)
    if not isinstance(waiters, collections.deque):
        # Not the Event this module knows (another Python, a subclass of its own):
        # the task that Event.wait() needs.
        return asyncio.ensure_future(event.wait())
    fut: asyncio.Future[bool] = loop.create_future()
    if event.is_set():
        fut.set_result(True)
    else:
        waiters.append(fut)  # what Event.wait() does; Event.set() resolves each waiter
    return fut


def drop_event_future(event: asyncio.Event, fut: asyncio.Future[bool]) -> None:
    """Stop waiting: cancel ``fut`` if it is still pending and take it out of the event's
    waiters."""
    if not fut.done():
        fut.cancel()
    waiters = getattr(event, "_waiters", None)
    if isinstance(waiters, collections.deque):
        with contextlib.suppress(ValueError):  # not among them: a task's
            waiters.remove(fut)
