"""UTF-16 code-unit arithmetic on Python strings (Chord counts like JavaScript does)."""

from __future__ import annotations

# Why this module exists: Chord's `t` op and every string length the tracker
# reasons about count UTF-16 code units, because the reference implementation and
# every browser replica are JavaScript. Python's `str` indexes code points, so an
# astral character (U+10000 and up, e.g. an emoji) is one index here and two
# units there. A lone surrogate held in a Python string counts as one unit, as it
# would in JavaScript.


_NOT_ASTRAL_LEAD = bytes(range(0xF0)) + bytes(range(0xF5, 0x100))
"""Every byte but the lead bytes of 4-byte UTF-8 sequences (U+10000 and up)."""


def utf16_len(s: str) -> int:
    """Length of ``s`` in UTF-16 code units."""
    if s.isascii():
        return len(s)
    # One unit per code point, plus one per astral character (a surrogate pair); the
    # astral ones are the 4-byte UTF-8 sequences. Encoding to UTF-8 and deleting all but
    # their lead bytes is about three times faster than encoding to UTF-16.
    try:
        raw = s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: 3 bytes each, one unit each
        raw = s.encode("utf-8", "surrogatepass")
    return len(s) + len(raw.translate(None, _NOT_ASTRAL_LEAD))


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
    raw = head.encode("utf-16-le", "surrogatepass")
    if len(raw) <= 2 * n:
        # `head` has at most n code points; fewer units than n only when s is short.
        return s[n:] if len(head) == n and len(raw) == 2 * n else ""
    # The first n units, decoded back: one encode and one decode, whatever the length
    # (a split astral character decodes to its lone high surrogate).
    kept = raw[: 2 * n].decode("utf-16-le", "surrogatepass")
    k = len(kept)
    if s.startswith(kept):
        return s[k:]
    if s.startswith(kept[:-1]) and ord(s[k - 1]) > 0xFFFF:
        # The unit boundary falls inside the astral character at k - 1.
        return _low_surrogate(s[k - 1]) + s[k:]
    # Lone surrogates that pair up once encoded: find the boundary by bisection.
    return _drop_by_bisection(s, n)


def _drop_by_bisection(s: str, n: int) -> str:
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
