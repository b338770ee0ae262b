"""Chord: structural ops for replicated JSON values (tracker, applier, wire codec).

Wire-compatible with the TypeScript Chord of the pi project. This package imports nothing
else from ``toolfold``.

::

    ops = tracker.flush()                 # decoded ops, e.g. [["a", ["text"], "chunk"]]
    wire = encoder.encode(ops)            # what crosses a boundary (json.dumps(wire))
    replica = apply(replica, decoder.decode(wire))
"""

from __future__ import annotations

from ._apply import apply
from ._codec import Decoder, Encoder
from ._errors import ChordError, JSONValueError, PathError, ShapeError, UnsafePathError
from ._ops import (
    JSON,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    RESERVED_SEGMENTS,
    Batch,
    Op,
    Path,
    Segment,
    WireBatch,
    WireOp,
    check_json,
    describe,
    is_base,
    lone_surrogate,
    validate_op,
    validate_wire_op,
)
from ._text import utf16_len

# --- tracker (track, Tracker) ------------------------------------------------------------
# The tracker lives in _tracker.py; its names are imported and listed in __all__ here.
from ._tracker import TrackedDict, TrackedList, Tracker, track

# --- end tracker ---------------------------------------------------------------------------

__all__ = [
    "JSON",
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "RESERVED_SEGMENTS",
    "Batch",
    "ChordError",
    "Decoder",
    "Encoder",
    "JSONValueError",
    "Op",
    "Path",
    "PathError",
    "Segment",
    "ShapeError",
    "TrackedDict",
    "TrackedList",
    "Tracker",
    "UnsafePathError",
    "WireBatch",
    "WireOp",
    "apply",
    "check_json",
    "describe",
    "is_base",
    "lone_surrogate",
    "track",
    "utf16_len",
    "validate_op",
    "validate_wire_op",
]
