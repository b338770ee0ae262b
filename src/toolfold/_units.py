"""How sizes and counts read wherever a person sees them (CLI, footers, notices, progress).

Sizes use IEC binary units (KiB, MiB, GiB, TiB: powers of 1024), chosen once for the
whole project because every limit it enforces is a power of two (50 KiB windows,
256 KiB details, 1 GiB spill caps). The web viewer's ``fmtBytes`` follows the same
rule; ``tests/test_units.py`` checks the two agree.
"""

from __future__ import annotations

import re

__all__ = ["format_bytes", "parse_size", "plural"]

_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def format_bytes(n: int) -> str:
    """``512`` -> ``"512 B"``, ``1536`` -> ``"1.5 KiB"``, ``209715200`` -> ``"200 MiB"``.

    Below 10 of a unit one decimal is shown, from 10 on a whole number: three significant
    figures at most, never 1024 or more of a unit. Rounding is half up, in integers, so
    the viewer (``static/units.js``) gives the same text for every size.
    """
    if n < 0:
        return "-" + format_bytes(-n)
    if n < 1024:
        return f"{n} B"
    for power, unit in enumerate(_UNITS, start=1):
        d = 1024**power
        tenths = (20 * n + d) // (2 * d)  # 10 * n / d, rounded half up
        if tenths < 100:
            return f"{tenths // 10}.{tenths % 10} {unit}"
        whole = (2 * n + d) // (2 * d)
        if whole < 1024 or unit == _UNITS[-1]:
            return f"{whole:,} {unit}"
    raise AssertionError("unreachable: the last unit always returns")  # pragma: no cover


def plural(count: int, word: str, words: str | None = None) -> str:
    """``plural(1, "line")`` -> ``"1 line"``, ``plural(1000, "line")`` -> ``"1,000 lines"``
    (``words`` for an irregular plural)."""
    return f"{count:,} {word if count == 1 else (words or word + 's')}"


_SIZE = r"(\d{1,30})\s*([KMGT]?)(?:i?B)?"
"""A size as ``parse_size`` reads it (compiled on first use, by ``re``'s cache: a command
given no size option never compiles it)."""
_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def parse_size(text: str) -> int:
    """``"50K"`` -> ``51200``, ``"1G"`` -> ``1073741824``, ``"512"`` -> ``512``: a byte
    count, or a whole number with K, M, G or T (powers of 1024, as ``format_bytes``
    writes them; ``KiB``, ``KB`` and ``k`` read the same). The one size parser of every
    size option. Raises ``ValueError`` saying what a size looks like."""
    m = re.fullmatch(_SIZE, text.strip(), re.IGNORECASE)
    if m is None:
        raise ValueError(
            f"{text!r} is not a size: give bytes, or a whole number with K, M or G "
            "(powers of 1024), e.g. 51200, 50K or 1G"
        )
    return int(m.group(1)) << _SHIFT[m.group(2).upper()]
