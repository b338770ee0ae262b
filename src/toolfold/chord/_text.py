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


def _points_for_units(s: str, n: int) -> tuple[int, int]:
    """``(k, u)``: the fewest code points ``k`` of ``s`` whose UTF-16 length ``u`` reaches
    ``n`` units (``u`` is ``n``, or ``n + 1`` when an astral character straddles the
    boundary), or all of ``s`` when it is shorter (``u < n``).

    Each step takes a prefix of the remaining target that cannot overshoot it (at most
    ``t - a`` code points when ``a`` astral ones are among the next ``t``, or ``t // 2``),
    so the target at least halves per step and the whole costs a few C-speed UTF-8
    encodes of about ``n`` code points, never a per-character loop.
    """
    k = u = 0
    while u < n:
        t = n - u
        seg = s[k : k + t]
        if not seg:
            break  # s ended short of n units
        astral = 0 if seg.isascii() else utf16_len(seg) - len(seg)
        if len(seg) + astral <= t:  # all of it fits (then also s may have ended)
            k += len(seg)
            u += len(seg) + astral
            continue
        j = max(t - astral, t // 2)
        if j == 0:  # t == 1 and the next character is astral: it straddles the boundary
            return k + 1, u + 2
        # Astral ones in seg[:j]: those of seg minus those of its short rest (when
        # j = t - astral, the rest is only `astral` characters long).
        rest = seg[j:]
        k += j
        u += j + astral - (utf16_len(rest) - len(rest))
    return k, u


def drop_utf16_prefix(s: str, n: int) -> str:
    """Drop the first ``n`` UTF-16 code units of ``s`` (``n`` past the end gives ``""``).

    Splitting an astral character leaves its low surrogate as a lone code point,
    exactly as ``s.slice(n)`` does in JavaScript.
    """
    if n <= 0:
        return s
    if s[:n].isascii():
        return s[n:]
    k, u = _points_for_units(s, n)
    if u < n:
        return ""
    if u == n:
        return s[k:]
    # The unit boundary falls inside the astral character at k - 1.
    return _low_surrogate(s[k - 1]) + s[k:]


def utf16_prefix_len(s: str, units: int) -> int:
    """Number of code points of ``s`` that make up its first ``units`` UTF-16 units
    (rounding up when the boundary splits an astral character)."""
    if units <= 0:
        return 0
    head = s[:units]
    if head.isascii():
        return len(head)
    return _points_for_units(s, units)[0]
