"""What the command modules of the ``toolfold`` CLI share: click option groups and help
texts (how a command runs and ends is in ``_process.py``, which imports no click)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from toolfold._units import parse_size

from ._store import DEFAULT_STORE, STORE_ENV

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
