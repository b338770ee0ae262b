"""JSON encoding helpers for the sink.

Every value the sink holds passed Chord's value check when it was written (integers within
±(2**53 - 1), no lone surrogates, bounded depth), so ``orjson`` can always encode it.
"""

from __future__ import annotations

from typing import Any

import orjson


def dumps(value: Any) -> bytes:
    """Serialise a JSON value compactly."""
    return orjson.dumps(value)


def loads(data: bytes) -> Any:
    """Parse what ``dumps`` produced (a deep, unshared copy of the value)."""
    return orjson.loads(data)
