"""JSON encoding helpers for the sink: fast ``orjson`` with a standard-library fallback."""

from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> bytes:
    """Serialise a JSON value compactly.

    ``orjson`` refuses lone surrogates and integers beyond 64 bits, both of which are
    valid in a Python JSON value; the standard library takes those (escaped).
    """
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, separators=(",", ":")).encode("ascii")


def loads(data: bytes) -> Any:
    """Parse what ``dumps`` produced (a deep, unshared copy of the value)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)
