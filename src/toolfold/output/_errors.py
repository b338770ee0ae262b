"""The one exception hierarchy of the output sink.

::

    Exception
     └── OutputError               anything the sink refuses
          ├── OutputPolicyError    a bad ``OutputPolicy`` (also a ValueError)
          ├── OutputValueError     a bad argument to a sink method (also a ValueError)
          ├── OutputLimitError     an image or details bound was exceeded
          └── OutputClosedError    the sink was written to after settlement

Every message names the bad value, where it was, and what to do next.
"""

from __future__ import annotations


class OutputError(Exception):
    """Root of every error raised by ``toolfold.output``."""


class OutputPolicyError(OutputError, ValueError):
    """Raised when an ``OutputPolicy`` field is out of range (e.g. ``max_bytes=0``)."""


class OutputValueError(OutputError, ValueError):
    """Raised when a sink method gets a value it cannot store (a malformed image
    block, a negative usage count, a non-string tool name, a non-JSON details value)."""


class OutputLimitError(OutputError):
    """Raised when a bound on what is not text is exceeded: image count, bytes per
    image, total image bytes, or serialised details size.

    Everything written before the offending call is kept; the offending image is not
    added, and oversized details are rolled back to the last state that fitted.
    """


class OutputClosedError(OutputError):
    """Raised when a tool writes to its ``ToolOutput`` after the call settled."""
