"""The tracker's string diff is the smallest one its probe can see, not merely a correct one.

Any diff folds to the right value, so the replication tests cannot tell a good diff from a
wasteful one. These tests hold the diff to a brute-force reference written from the
definition (docs/tracker.md, "Strings"): the result is an ``a`` when the old string is a
prefix, nothing when equal, otherwise ``t`` of the longest overlap (a suffix of the old
string, inside the last ``max_overlap_scan`` UTF-16 units, that starts the new one) plus
``a`` of the rest, and ``s`` only when no such overlap exists. The probe is allowed to give
up on repetitive text (a bounded number of candidates per probe); the reference is
compared only on inputs where that bound cannot bite, and the bound itself is pinned by
examples at its edge.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolfold.chord import apply, track, utf16_len


def diff(old: str, new: str, scan: int = 65536) -> list[Any]:
    """The ops a tracker flushes for ``old`` → ``new`` at key ``"s"``; checks that they fold."""
    t = track({"s": old}, max_overlap_scan=scan)
    replica = apply(None, t.flush())
    t.state["s"] = new
    ops = t.flush()
    assert apply(replica, ops) == {"s": new}
    return ops


def reference(old: str, new: str, scan: int) -> list[Any]:
    """The smallest diff by definition, by brute force over every cut of ``old``."""
    if len(new) > len(old) and new.startswith(old):
        return [["a", ["s"], new[len(old) :]]]
    if new == old:
        return []
    # The window: the code points of `old` that lie wholly inside its last `scan` units.
    window = next(i for i in range(len(old) + 1) if utf16_len(old[i:]) <= scan)
    for p in range(max(window, 1), len(old)):
        if new.startswith(old[p:]):
            ops: list[Any] = [["t", ["s"], utf16_len(old[:p])]]
            rest = new[len(old) - p :]
            return [*ops, ["a", ["s"], rest]] if rest else ops
    return [["s", ["s"], new]]


@pytest.mark.parametrize(
    "old", ["ab", "😀a", "baa", "a😀b😀cd", "😀😀ab", "ab😀", "xyz😀", "😀abc", "aaba😀aab"]
)
def test_every_cut_at_every_scan_gets_the_smallest_diff(old: str) -> None:
    # Exhaustive where random draws rarely land: an overlap that starts exactly at the edge
    # of the window, with astral characters (two units, one code point) on either side of it.
    for scan in range(utf16_len(old) + 2):
        for cut in range(len(old) + 1):
            for tail in ("", "X"):
                new = old[cut:] + tail
                assert diff(old, new, scan) == reference(old, new, scan), (scan, new)


# Few distinct characters (overlaps are common), astral ones included (units != code points).
SMALL = st.text(alphabet="ab😀", max_size=9)
SCAN = st.integers(min_value=0, max_value=12)


@given(old=SMALL, new=st.text(alphabet="ab😀", max_size=12), scan=SCAN)
def test_short_strings_get_the_smallest_diff(old: str, new: str, scan: int) -> None:
    # At most 9 code points: neither probe can try more than 8 cuts, so the bound never bites.
    assert diff(old, new, scan) == reference(old, new, scan)


@given(
    chars=st.lists(
        st.characters(codec="utf-8", exclude_categories=["Cs"]),
        unique=True,
        min_size=2,
        max_size=150,
    ),
    cut=st.integers(min_value=0, max_value=150),
    tail=st.text(max_size=80),
    scan=st.integers(min_value=0, max_value=200),
)
def test_long_strings_without_repeats_get_the_smallest_diff(
    chars: list[str], cut: int, tail: str, scan: int
) -> None:
    # Distinct characters: every character of the old string occurs once, so each probe has
    # at most one candidate and long overlaps (past the 64-character head) are exact too.
    old = "".join(chars)
    new = old[min(cut, len(old)) :] + tail
    assert diff(old, new, scan) == reference(old, new, scan)


def test_writing_the_old_string_back_is_no_op() -> None:
    t = track({"s": "abc"})
    t.flush()
    t.state["s"] = "xyz"
    t.state["s"] = "abc"  # the slot is anchored at "abc" and holds "abc" again at flush
    assert t.flush() == []


# -- the probe's bounds (docs/tracker.md: 64-character head, 8 candidates per probe) ------------

H = "h" + "0123456789" * 6 + "012"  # the 64-character head, with one "h"


@pytest.mark.parametrize("misses", range(10))
def test_the_long_probe_verifies_at_most_8_candidates(misses: int) -> None:
    # `misses` copies of the head that do not continue like the new value, then the overlap.
    # Eight lone "h" first: once the long probe gives up, the short one gives up too.
    old = "-" + "h" * 8 + (H + "!") * misses + H + "YYYYY"
    new = H + "Y" * 10
    expected = reference(old, new, 65536) if misses < 8 else [["s", ["s"], new]]
    assert expected[0][0] == ("t" if misses < 8 else "s")
    assert diff(old, new) == expected


@pytest.mark.parametrize("misses", range(10))
def test_the_long_probe_never_counts_position_0(misses: int) -> None:
    # The head at position 0 is no candidate (dropping nothing is not a `t`); it must not use
    # up one of the 8 tries.
    old = (H + "!") * (misses + 1) + H + "YYYYY"
    new = H + "Y" * 10
    expected = reference(old, new, 65536) if misses < 8 else [["s", ["s"], new]]
    assert diff(old, new) == expected


def test_the_long_probe_tries_the_very_next_position() -> None:
    # A failed candidate and the overlap one position later (the head occurs at both).
    old = "-" + "a" * 65 + "Z"
    new = "a" * 64 + "ZQ"
    assert diff(old, new) == [["t", ["s"], 2], ["a", ["s"], "Q"]]


@pytest.mark.parametrize("misses", range(10))
def test_the_short_probe_verifies_at_most_8_candidates(misses: int) -> None:
    # The head (new[:64]) occurs nowhere, so only the 1-character probe can find the
    # overlap "abbb", behind `misses` failing "a"s.
    old = "-" * 10 + "ac" * misses + "abbb"
    new = "a" + "b" * 70
    expected = reference(old, new, 65536) if misses < 8 else [["s", ["s"], new]]
    assert expected[0][0] == ("t" if misses < 8 else "s")
    assert diff(old, new) == expected


@pytest.mark.parametrize("misses", range(8))
def test_the_short_probe_looks_only_at_the_last_63_positions(misses: int) -> None:
    # Two failing "a"s just outside the last 63 positions (at la - 65 and la - 64: overlaps
    # that long contain the head, which the long probe already ruled out) use up no try.
    tail = "ac" * misses + "abbb"
    old = "-" * 10 + "aa" + "-" * (63 - len(tail)) + tail
    assert len(old) - 65 == 10
    new = "a" + "b" * 70
    assert diff(old, new) == reference(old, new, 65536)


def test_the_short_probe_starts_63_positions_from_the_end() -> None:
    # An overlap of exactly 63 characters: the longest the 1-character probe must find.
    old = "--" + "a" + "b" * 62
    new = "a" + "b" * 70
    assert diff(old, new) == [["t", ["s"], 2], ["a", ["s"], "b" * 8]]


def test_once_the_long_probe_gives_up_the_result_is_s() -> None:
    # docs/tracker.md: "each probe gives up after 8 candidates and the result is an s", even
    # with a short overlap at the very end that the 1-character probe could have seen.
    old = "-" + (H + "!") * 8 + H[:10]
    new = H + "Y"
    assert diff(old, new) == [["s", ["s"], new]]
