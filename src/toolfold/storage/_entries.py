"""What a read hands back: a stored list's elements and the transcript's entries, and
the transcript index of the in-process backends (memory, JSONL).

Apart from ``_records`` because a process that only commits (``toolfold run``) never
reads a list or an entry: these records are defined when a read first needs them.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._paging import key_range
from ._records import load_stored

if TYPE_CHECKING:
    from ._records import Order
    from ._writes import JSON

__all__ = ["Entry", "EntryIndex", "ListElement"]


@dataclass(frozen=True, slots=True)
class ListElement:
    """One element of a stored list: its global ``seq``, opaque ``value`` and ``tag``."""

    seq: int
    value: JSON
    tag: str | None


@dataclass(frozen=True, slots=True)
class Entry:
    """One settled transcript entry with its global ``seq``, its index ``key`` and its
    ``summary`` (both as written by ``append_entry``; ``value`` is ``None`` when read
    with ``summaries=True``)."""

    seq: int
    value: JSON
    key: str | None = None
    summary: JSON = None


class _StoredEntry:
    __slots__ = ("data", "key", "seq", "summary")

    def __init__(self, seq: int, data: bytes, key: str | None, summary: bytes) -> None:
        self.seq = seq
        self.data = data
        self.key = key
        self.summary = summary


def _seq(e: _StoredEntry) -> int:
    return e.seq


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
