"""How a ``toolfold`` command runs its coroutine and ends its process: store errors
turned into one line, the fast end after a finished command, session names checked.
Imports no click: a bare ``toolfold run -- CMD`` (``_entry.py``) runs without it."""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Coroutine
from typing import Any, NoReturn

from ._errors import CliError, StoreOpenError
from ._store import StoreSpec, storage_message

_collector_paused = False
_startup_frozen = False


def pause_collector() -> None:
    """Turn the cyclic garbage collector off while a ``toolfold`` process starts up
    (``main`` as the process's entry point): its imports and class definitions make
    objects that live as long as the process, and the collections they would trigger
    (~2 ms of ``toolfold run -- true``'s CPU; ``benchmarks/bench_startup.py``) find
    nothing to free. :func:`resume_collector` turns it back on before the command runs."""
    global _collector_paused
    if gc.isenabled():
        gc.disable()
        _collector_paused = True


def resume_collector() -> None:
    """Start-up is over, the command is about to run: what start-up made is moved out of
    the collector's generations (``gc.freeze``: later collections do not walk it again)
    and the collector is turned back on, so a long command's process collects as usual.
    Does nothing unless :func:`pause_collector` turned it off."""
    global _collector_paused, _startup_frozen
    if _collector_paused:
        _collector_paused = False
        gc.freeze()
        _startup_frozen = True
        gc.enable()


def collector_as_before() -> None:
    """Before the interpreter's ordinary exit (``main`` returning or raising, not the
    fast end of :func:`end_process`): the collector on, and what start-up froze handed
    back to it, so the teardown finalizes every object as it would without
    :func:`pause_collector`."""
    global _collector_paused, _startup_frozen
    if _collector_paused:
        _collector_paused = False
        gc.enable()
    if _startup_frozen:
        _startup_frozen = False
        gc.unfreeze()


def _arun(coro: Coroutine[Any, Any, int], spec: StoreSpec | None = None) -> int:
    import asyncio

    from toolfold.harness import DurabilityError
    from toolfold.storage import StorageError

    try:
        return asyncio.run(coro)
    except StorageError as exc:
        if spec is None:
            raise CliError(" ".join(str(exc).split())) from exc
        raise StoreOpenError(storage_message(exc, spec)) from exc
    except DurabilityError as exc:
        # A durable record the harness cannot read back (a malformed call record, a
        # checkpoint list without a base batch): the store is damaged, say where.
        where = f"store {spec.describe()}" if spec is not None else "the store"
        raise StoreOpenError(
            f"{where} holds durable records that cannot be read: {' '.join(str(exc).split())}"
        ) from exc


def _exit(code: int) -> NoReturn:
    sys.stdout.flush()
    raise SystemExit(code)


class Finished(SystemExit):
    """The exit of a command that has done all it must before its process ends: its
    store closed (every commit flushed), its files closed, its output written. ``main``,
    as the process's entry point, then ends the process at once (``end_process``)."""


def _finish(code: int) -> NoReturn:
    sys.stdout.flush()
    raise Finished(code)


def end_process(code: object) -> NoReturn:
    """End the process with ``code`` after a ``Finished`` command: the exit handlers run
    (``atexit``: an OpenTelemetry exporter's flush, say) and stdout and stderr are
    flushed, as at any exit; what is skipped is the interpreter's teardown, which frees
    every module and object one by one, about 20 ms of CPU after ``toolfold run``'s
    imports (a seventh of the whole process; ``benchmarks/bench_startup.py``). Anything
    unusual (another thread still running, a status that is not a small int, a stream
    that cannot be flushed) takes the ordinary exit instead."""
    import atexit
    import os
    import threading

    status = 0 if code is None else code
    # A worker thread still finishing (a store's, an executor's) would be joined by the
    # ordinary exit too: give it that chance, bounded, before counting threads.
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(0.5)
    if not isinstance(status, int) or not 0 <= status <= 255 or threading.active_count() > 1:
        raise SystemExit(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        raise SystemExit(code) from None  # the ordinary exit reports it as it always did
    os._exit(status)


def _quote(part: str) -> str:
    import shlex

    return shlex.quote(part)


_SESSION_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


def _check_session_name(name: str) -> None:
    # The storage layer's rule (safe as a file name everywhere), checked up front so
    # the message names the flag rather than the store.
    if _SESSION_NAME.fullmatch(name) is None or name.startswith("."):
        raise CliError(
            f"invalid session name {name!r}: use 1-128 characters of A-Z a-z 0-9 . _ - "
            "not starting with '.'"
        )
