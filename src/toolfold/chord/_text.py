"""UTF-16 code-unit arithmetic on Python strings (Chord counts like JavaScript does)."""

from __future__ import annotations

# Why this module exists: Chord's `t` op and every string length the tracker
# reasons about count UTF-16 code units, because the reference implementation and
# every browser replica are JavaScript. Python's `str` indexes code points, so an
# astral character (U+10000 and up, e.g. an emoji) is one index here and two
# units there. A lone surrogate held in a Python string counts as one unit, as it
# would in JavaScript.


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _low_surrogate(ch: str) -> str:
    return chr(0xDC00 + ((ord(ch) - 0x10000) & 0x3FF))


def drop_utf16_prefix(s: str, n: int) -> str:
    """Drop the first ``n`` UTF-16 code units of ``s`` (``n`` past the end gives ``""``).

    Splitting an astral character leaves its low surrogate as a lone code point,
    exactly as ``s.slice(n)`` does in JavaScript.
    """
    if n <= 0:
        return s
    head = s[:n]
    if head.isascii():
        return s[n:]
    units = utf16_len(head)
    if units <= n:
        # `head` has at most n code points; fewer units than n only when s is short.
        return s[n:] if len(head) == n and units == n else ""
    # Smallest k with utf16_len(s[:k]) >= n, by bisection on C-speed slices.
    lo, hi = (n + 1) // 2, n
    while lo < hi:
        mid = (lo + hi) // 2
        if utf16_len(s[:mid]) >= n:
            hi = mid
        else:
            lo = mid + 1
    if utf16_len(s[:lo]) == n:
        return s[lo:]
    # The unit boundary falls inside the astral character at lo - 1.
    return _low_surrogate(s[lo - 1]) + s[lo:]


def utf16_prefix_len(s: str, units: int) -> int:
    """Number of code points of ``s`` that make up its first ``units`` UTF-16 units
    (rounding up when the boundary splits an astral character)."""
    if units <= 0:
        return 0
    head = s[:units]
    if head.isascii():
        return len(head)
    if utf16_len(head) <= units:
        return len(head)
    lo, hi = (units + 1) // 2, units
    while lo < hi:
        mid = (lo + hi) // 2
        if utf16_len(s[:mid]) >= units:
            hi = mid
        else:
            lo = mid + 1
    return lo
