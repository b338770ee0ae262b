"""The one exception hierarchy of the durability layer.

::

    Exception
     └── DurabilityError          anything the durable layer refuses or reports
          ├── RecoveryError        a durable stream cannot be folded back into a value
          └── MemoError            a memo call that cannot be honoured (also a ValueError)
"""

from __future__ import annotations


class DurabilityError(Exception):
    """Root of every error the durable layer raises."""


class RecoveryError(DurabilityError):
    """A durable stream cannot be folded back into a value (no base batch, bad batch)."""


class MemoError(DurabilityError, ValueError):
    """A memo call that cannot be honoured: bad name, no durable session, settled call."""
