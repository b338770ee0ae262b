"""Paging rules every backend shares (exclusive cursor, order, limit, the inclusive
``stop_at_tag`` cut, key prefixes as ranges). The transcript index of the in-process
backends (memory, JSONL) is in ``_entries``."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol, TypeVar

from ._records import Order

__all__ = ["Paged", "cut_at_tag", "key_range", "page_sorted"]


class Paged(Protocol):
    """Anything the pager can page: it has a ``seq`` and a ``tag``."""

    @property
    def seq(self) -> int: ...
    @property
    def tag(self) -> str | None: ...


P = TypeVar("P", bound=Paged)


def cut_at_tag(elements: list[P], stop_at_tag: str | None) -> list[P]:
    """Cut a page right *after* the first element tagged ``stop_at_tag`` (inclusive stop)."""
    if stop_at_tag is None:
        return elements
    for i, el in enumerate(elements):
        if el.tag == stop_at_tag:
            return elements[: i + 1]
    return elements


def page_sorted(
    elements: Sequence[P],
    *,
    cursor: int | None,
    order: Order,
    limit: int | None,
    stop_at_tag: str | None,
) -> list[P]:
    """Page an ascending-by-seq sequence: exclusive cursor, order, at most ``limit``
    examined, then the inclusive ``stop_at_tag`` cut. Never looks past the page."""
    if order == "asc":
        start = 0 if cursor is None else bisect.bisect_right(elements, cursor, key=_seq)
        end = len(elements) if limit is None else min(len(elements), start + limit)
        page = list(elements[start:end])
    else:
        end = len(elements) if cursor is None else bisect.bisect_left(elements, cursor, key=_seq)
        start = 0 if limit is None else max(0, end - limit)
        page = list(elements[start:end])
        page.reverse()
    return cut_at_tag(page, stop_at_tag)


def _seq(el: Paged) -> int:
    return el.seq


def key_range(prefix: str) -> tuple[str, str | None]:
    """``(low, high)`` such that ``low <= key < high`` (no ``high``: no upper bound) is
    exactly "``key`` starts with ``prefix``" in code point order — the order of SQLite's
    UTF-8 bytes and of PostgreSQL's ``COLLATE "C"``, so an index on the key serves it."""
    for i in range(len(prefix) - 1, -1, -1):
        c = ord(prefix[i])
        nxt = c + 1 if c + 1 != 0xD800 else 0xE000  # skip the surrogate block
        if nxt <= 0x10FFFF:
            return prefix, prefix[:i] + chr(nxt)
    return prefix, None
