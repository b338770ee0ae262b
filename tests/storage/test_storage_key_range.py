"""``key_range``: the ``[low, high)`` bounds that turn "key starts with prefix" into an
index range, checked exhaustively at the edges of Unicode (the surrogate block and the
last code point), and through SQLite, which must be able to bind the bound it gets."""

from __future__ import annotations

import itertools
from pathlib import Path

from toolfold.storage import append_entry, open_repository, set_value, value
from toolfold.storage._paging import key_range

# The code points where the next one is not simply c + 1, and their neighbours.
EDGES = ["a", "\ud7fe", "\ud7ff", "\ue000", "\U0010fffe", "\U0010ffff"]


def strings(max_len: int) -> list[str]:
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(EDGES, repeat=n)]


def test_the_range_holds_exactly_the_keys_with_the_prefix() -> None:
    keys = strings(3)
    for prefix in strings(2):
        low, high = key_range(prefix)
        if high is not None:
            high.encode()  # valid Unicode: a database driver can bind it
        for key in keys:
            inside = low <= key and (high is None or key < high)
            assert inside == key.startswith(prefix), (prefix, key, high)


async def test_sqlite_scans_prefixes_at_the_edges_of_unicode(tmp_path: Path) -> None:
    repo = open_repository(f"sqlite:{tmp_path / 's.db'}")
    try:
        s = await repo.create_session("s")
        keys = strings(2)[1:]
        await s.commit([set_value(value("ns", k), k) for k in keys])
        await s.commit([append_entry(k, key=k) for k in keys])
        for prefix in EDGES:
            want = sorted(k for k in keys if k.startswith(prefix))
            assert [k for k, _ in await s.scan_values("ns", prefix)] == want
            found = await s.entries_by_key(prefix, prefix=True)
            assert sorted(e.key for e in found if e.key is not None) == want
    finally:
        await repo.close()
