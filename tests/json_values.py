"""Comparing JSON values exactly, for the tests of the two JSON codecs."""

from __future__ import annotations

import math
from typing import Any


def same(a: Any, b: Any) -> bool:
    """Equal values of the same JSON types (``1 == 1.0 == True`` is not enough), floats
    to the bit (``-0.0`` is not ``0.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)
