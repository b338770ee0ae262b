"""What the command modules of the ``toolfold`` CLI share: option groups and help texts,
running a command's coroutine with store errors turned into one line, session names."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn, TypeVar

import click

from toolfold._units import parse_size

from ._errors import CliError, StoreOpenError
from ._store import DEFAULT_STORE, STORE_ENV, StoreSpec, storage_message

STORE_HELP = (
    f"Store URL: sqlite:PATH, jsonl:DIR, postgresql://..., memory:. "
    f"Default: ${STORE_ENV}, else {DEFAULT_STORE}."
)

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

F = TypeVar("F", bound=Callable[..., Any])


def size_option(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The callback of every size option (``--max-bytes``, ``--max-spill``,
    ``--max-message-bytes``): bytes, or a whole number with K, M or G, read by the
    project's one size parser. ``SIZE`` is the option settings that apply it."""
    if value is None or isinstance(value, int):
        return value
    try:
        return parse_size(str(value))
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from exc


SIZE: dict[str, Any] = {"metavar": "SIZE", "callback": size_option}


def _options(*options: Callable[[F], F]) -> Callable[[F], F]:
    """Several click options as one decorator, listed in the order given."""

    def apply(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f

    return apply


def _session_and_store(help_session: str) -> Callable[[F], F]:
    """``--session NAME`` (with its help) and ``--store URL``."""
    return _options(
        click.option("--session", "session", metavar="NAME", help=help_session),
        click.option("--store", "store", metavar="URL", help=STORE_HELP),
    )


def head_share_option(retain_flag: str) -> Callable[[F], F]:
    """``--head-share FRACTION``: the head's share of the caps under ``retain_flag
    head_tail`` (checked with the other limits, so a bad one is a ``toolfold: error:``)."""
    return click.option(
        "--head-share",
        "head_share",
        type=float,
        metavar="FRACTION",
        help=f"With {retain_flag} head_tail: the share of each window cap the start keeps, "
        "between 0 and 1 (default 0.2); the rest keeps the end.",
    )


def _window(retain: str, what: str) -> Callable[[F], F]:
    """``--retain`` (default ``retain``), ``--head-share``, ``--max-bytes`` and
    ``--max-lines``: the window ``what`` is cut to (``run`` and ``mcp proxy``)."""
    return _options(
        click.option(
            "--retain",
            type=click.Choice(["head", "tail", "head_tail"]),
            default=retain,
            show_default=True,
            help=f"Keep the start, the end, or both (head_tail: the first 20% (--head-share), "
            f"the rest for the end, cut in the middle) of {what} in the window.",
        ),
        head_share_option("--retain"),
        click.option(
            "--max-bytes",
            **SIZE,
            help="Window size: bytes, or with K, M or G (default 50K).",
        ),
        click.option(
            "--max-lines", type=int, metavar="N", help="Window size in lines (default 2000)."
        ),
    )


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
