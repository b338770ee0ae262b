"""Plain JSON value helpers for the tracker: a deep copy for op payloads and JSON equality."""

from __future__ import annotations

import math
from typing import Any


def _copy(value: Any) -> Any:
    """Plain deep copy of an already-valid JSON value (for op payloads: no aliasing)."""
    t = type(value)
    if t is dict:
        return {
            k: (_copy(v) if type(v) is dict or type(v) is list else v) for k, v in value.items()
        }
    if t is list:
        return [(_copy(v) if type(v) is dict or type(v) is list else v) for v in value]
    return value


def _json_eq(a: Any, b: Any) -> bool:
    """Equality as JSON sees it: ``True`` is not ``1`` and ``1`` is not ``1.0`` here."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is dict:
        if len(a) != len(b) or a != b:
            return False
        return all(_json_eq(v, b[k]) for k, v in a.items())
    if ta is list:
        if len(a) != len(b) or a != b:
            return False
        return all(_json_eq(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _same_scalar(a: Any, b: Any) -> bool:
    """``a == b`` already holds for two values of one type; floats also need the same
    sign (``-0.0`` and ``0.0`` serialise differently)."""
    return type(a) is not float or math.copysign(1.0, a) == math.copysign(1.0, b)
