"""Paging rules every backend shares (exclusive cursor, order, limit, the inclusive
``stop_at_tag`` cut, key prefixes as ranges), and the transcript index of the in-process
backends (memory, JSONL)."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol, TypeVar

from ._records import Entry, Order, load_stored

__all__ = ["EntryIndex", "Paged", "cut_at_tag", "key_range", "page_sorted"]


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


def _seq(el: Paged | _StoredEntry) -> int:
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


class _StoredEntry:
    __slots__ = ("data", "key", "seq", "summary")

    def __init__(self, seq: int, data: bytes, key: str | None, summary: bytes) -> None:
        self.seq = seq
        self.data = data
        self.key = key
        self.summary = summary


class EntryIndex:
    """The transcript as the in-process backends (memory, JSONL) hold it: encoded entries
    in seq order, plus the keyed ones by position and by key, so a page, a count or a
    lookup by key costs what it returns rather than the whole transcript."""

    def __init__(self) -> None:
        self._all: list[_StoredEntry] = []
        self._keyed: list[_StoredEntry] = []
        self._by_key: dict[str, list[_StoredEntry]] = {}
        self._sorted_keys: list[str] = []

    def append(self, seq: int, data: bytes, key: str | None, summary: bytes) -> None:
        """Add an entry (seqs only grow)."""
        e = _StoredEntry(seq, data, key, summary)
        self._all.append(e)
        if key is not None:
            self._keyed.append(e)
            same = self._by_key.get(key)
            if same is None:
                self._by_key[key] = [e]
                bisect.insort(self._sorted_keys, key)
            else:
                same.append(e)

    def count(self, keyed: bool) -> int:
        """How many entries (keyed ones only when ``keyed``)."""
        return len(self._keyed if keyed else self._all)

    def read(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]:
        """A page, as :meth:`Session.read_entries` defines it."""
        items = self._keyed if keyed else self._all
        if order == "asc":
            start = 0 if cursor is None else bisect.bisect_right(items, cursor, key=_seq)
            start += offset
            end = len(items) if limit is None else min(len(items), start + limit)
            page = items[start:end]
        else:
            end = len(items) if cursor is None else bisect.bisect_left(items, cursor, key=_seq)
            end = max(0, end - offset)
            start = 0 if limit is None else max(0, end - limit)
            page = items[start:end][::-1]
        return [_loaded(e, summaries) for e in page]

    def by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]:
        """Entries under ``key`` (or every key starting with it), by seq."""
        if not prefix:
            found = list(self._by_key.get(key, ()))
        else:
            low, high = key_range(key)
            i = bisect.bisect_left(self._sorted_keys, low)
            j = (
                len(self._sorted_keys)
                if high is None
                else bisect.bisect_left(self._sorted_keys, high)
            )
            found = sorted((e for k in self._sorted_keys[i:j] for e in self._by_key[k]), key=_seq)
        return [_loaded(e, False) for e in found[:limit]]


def _loaded(e: _StoredEntry, summaries: bool) -> Entry:
    return Entry(e.seq, None if summaries else load_stored(e.data), e.key, load_stored(e.summary))
