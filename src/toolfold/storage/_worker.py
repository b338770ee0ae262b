"""One thread that runs a store's blocking calls in order, each handed back to the
event loop that asked for it as a plain future.

What ``loop.run_in_executor`` on a one-thread ``ThreadPoolExecutor`` does, without its
``concurrent.futures.Future`` (a lock and a condition made per call), the chaining of
that future to an asyncio one, and the executor's bookkeeping: a call is the callable
and the caller's future on a ``SimpleQueue``; its result reaches the future through
one ``call_soon_threadsafe``. The worker sleeps between calls, as the executor's does,
and the two costs that remain per call are the ones any hop to a thread pays (waking
the worker, waking the loop): docs/BENCHMARKS.md, "Sixth round: the proxy's CPU".

Like the executor's, the thread is not a daemon (an exit waits for the call it runs)
and is told to end when the interpreter exits (``threading._register_atexit``, the
hook ``concurrent.futures`` uses): the calls already queued run, then it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, TypeVar

__all__ = ["WorkerThread"]

T = TypeVar("T")

_Job = tuple[Callable[[], Any], "asyncio.Future[Any]", asyncio.AbstractEventLoop]

_running: weakref.WeakSet[WorkerThread] = weakref.WeakSet()
_exiting = False


def _end_all() -> None:
    # At interpreter exit, before non-daemon threads are joined: no thread starts after.
    global _exiting
    _exiting = True
    for worker in list(_running):
        worker.shutdown()


# Not in every Python's threading (nor in its stubs): without it the thread is a daemon,
# so that an exit never waits on it.
_register_atexit = getattr(threading, "_register_atexit", None)
if _register_atexit is not None:
    _register_atexit(_end_all)


class WorkerThread:
    """Runs callables on one thread of its own, one at a time, in submission order.

    A call whose future is cancelled before the thread takes it up is not run (as an
    executor's pending call is not); one already running runs to its end, its result
    dropped. The thread starts with the first call; :meth:`shutdown` (or the
    interpreter's exit) ends it once the calls already queued have run."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.closed = False

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        """``fn()`` on the thread: the running loop's future of its result (or of what
        it raised). ``RuntimeError`` once :meth:`shutdown` was called."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if _exiting:
                self.closed = True
            if self.closed:
                raise RuntimeError(f"{self.name} is shut down")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name=self.name, daemon=_register_atexit is None
                )
                self._thread.start()
                _running.add(self)
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((fn, future, loop))
        return future

    def shutdown(self) -> None:
        """Take no more calls; the thread ends once those already queued have run."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._thread is not None:
                self._jobs.put(None)

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            fn, future, loop = job
            if future.cancelled():  # a read of its state: set only on the loop's thread
                continue
            try:
                result = fn()
            except BaseException as exc:  # handed to the caller, as an executor does
                _hand_back(loop, future, None, exc)
            else:
                _hand_back(loop, future, result, None)
            del job, fn, future, loop  # hold nothing of a finished call while waiting


def _hand_back(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    # A loop closed meanwhile has no one left to tell.
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle, future, result, exc)


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is None:
        future.set_result(result)
    else:
        future.set_exception(exc)
