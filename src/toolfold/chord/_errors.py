"""The one exception hierarchy of Chord.

::

    ValueError
     └── ChordError            anything Chord refuses (untrusted ops, producer misuse)
          ├── ShapeError       a malformed op: unknown verb, wrong arity, wrong field type
          │    └── JSONValueError   a payload that is not JSON-only (also a TypeError)
          ├── PathError        a path that cannot be resolved (carries ``.path``)
          └── UnsafePathError  a reserved or invalid path segment (carries ``.segment``)

Only these escape from ``decode``, ``apply`` and the ``validate_*`` functions,
whatever the input.
"""

from __future__ import annotations

from typing import Any


class ChordError(ValueError):
    """Root of every error Chord raises for bad ops or misuse of the tracker."""


class ShapeError(ChordError):
    """Raised when an op or wire op is not a well-formed tuple of a known verb.

    This corresponds to the TypeScript reference's ``TypeError`` for malformed ops.
    """


class PathError(ChordError):
    """Raised when a path cannot be resolved against the value (or an id is unknown).

    ``path`` is the offending path (or wire path form) as given.
    """

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = path


class UnsafePathError(ChordError):
    """Raised when a path segment is reserved (``__proto__``, ``constructor``,
    ``prototype``) or not a ``str`` / non-negative integer.

    ``segment`` is the offending segment.
    """

    def __init__(self, message: str, segment: Any = None) -> None:
        super().__init__(message)
        self.segment = segment


class JSONValueError(ShapeError, TypeError):
    """Raised when a value to replicate is not JSON-only (a ``set``, ``tuple``, ``bytes``, NaN,
    a non-``str`` key, nesting beyond the depth bound, ...).

    It is a ``ChordError`` (so ``apply`` lets nothing else escape) and a ``TypeError`` (what
    Python callers expect for a value of the wrong type). ``path`` is where the bad part sits.
    """

    def __init__(self, message: str, path: Any = None) -> None:
        super().__init__(message)
        self.path = path
