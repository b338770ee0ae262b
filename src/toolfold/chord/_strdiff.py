"""String slots of the tracker: turn (anchor, current) into ``a`` / ``t``+``a`` / ``s`` at flush."""

from __future__ import annotations

from typing import Any

from ._text import utf16_len, utf16_prefix_len

__all__ = ["string_ops"]

# The overlap probe (spec "The tracker", Strings): a long head finds overlaps of at least
# _HEAD characters in one native `str.find`; a 1-char head finds the short ones near the end
# of the anchor. Each probe verifies at most _CANDIDATES positions, so repetitive text (where
# the head occurs everywhere) costs a bounded amount and falls back to `s` - larger, never
# wrong.
_HEAD = 64
_CANDIDATES = 8


def _window_start(anchor: str, scan: int) -> int:
    """First code point of ``anchor`` inside its last ``scan`` UTF-16 units.

    Only the tail is measured, so this is O(scan), not O(len(anchor)); a window boundary that
    falls inside an astral character starts after it (the window never exceeds ``scan``).
    """
    la = len(anchor)
    if la <= scan:
        tail = anchor
        skipped = 0
    else:
        skipped = la - scan
        tail = anchor[skipped:]
    units = len(tail) if tail.isascii() else utf16_len(tail)
    if units <= scan:
        return skipped
    return skipped + utf16_prefix_len(tail, units - scan)


def _verified(anchor: str, cur: str, p: int) -> bool:
    """Is ``anchor[p:]`` a prefix of ``cur``? Cheap rejections first, then one native compare."""
    overlap = len(anchor) - p
    if overlap > len(cur) or cur[overlap - 1] != anchor[-1]:
        return False
    return cur.startswith(anchor[p:])


def _overlap_start(anchor: str, cur: str, scan: int) -> int:
    """Smallest ``p >= 1`` the bounded probe finds with ``anchor[p:]`` a prefix of ``cur``
    (the longest overlap it can see), or -1."""
    la = len(anchor)
    if la < 2 or not cur or scan <= 0:
        return -1
    start = max(_window_start(anchor, scan), 1)
    if start >= la:
        return -1
    head = cur[:_HEAD]
    find = anchor.find
    exhausted = False
    pos = find(head, start)
    tried = 0
    while pos >= 0:
        if _verified(anchor, cur, pos):
            return pos
        tried += 1
        if tried >= _CANDIDATES:
            exhausted = True
            break
        pos = find(head, pos + 1)
    # Every overlap at least len(head) long contains the head, so when the long probe ran to
    # completion the short probe only needs the last len(head) - 1 positions.
    begin = start if exhausted else max(start, la - len(head) + 1)
    first = cur[0]
    pos = find(first, begin)
    tried = 0
    while pos >= 0:
        if _verified(anchor, cur, pos):
            return pos
        tried += 1
        if tried >= _CANDIDATES:
            break
        pos = find(first, pos + 1)
    return -1


def string_ops(ops: list[list[Any]], path: list[Any], anchor: str, cur: str, scan: int) -> None:
    """Append to ``ops`` what turns ``anchor`` (the replica's string) into ``cur`` at ``path``.

    Equal: nothing. Grown with the anchor as prefix: ``a``. Otherwise the longest overlap the
    probe finds (a suffix of the anchor that starts ``cur``): ``t`` (units dropped) plus ``a``
    of the rest when non-empty. No overlap: ``s``.
    """
    la = len(anchor)
    if len(cur) > la and cur.startswith(anchor):
        ops.append(["a", path, cur[la:]])
        return
    if cur == anchor:
        return
    p = _overlap_start(anchor, cur, scan)
    if p < 0:
        ops.append(["s", path, cur])
        return
    dropped = anchor[:p]
    # `t` counts UTF-16 code units: what a JavaScript replica's `slice` drops.
    ops.append(["t", path, len(dropped) if dropped.isascii() else utf16_len(dropped)])
    rest = cur[la - p :]
    if rest:
        ops.append(["a", list(path), rest])
