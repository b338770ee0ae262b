"""The one exception hierarchy of the durability layer.

::

    Exception
     └── DurabilityError          anything the durable layer refuses or reports
          ├── RecoveryError        a durable stream cannot be folded back into a value
          ├── MemoError            a memo call that cannot be honoured (also a ValueError)
          ├── LeaseHeldError       an operation whose lease another host holds, unexpired
          └── FencedError          a write whose fencing token is older than the stored
                                   one (also a storage ConflictError)
"""

from __future__ import annotations

from toolfold.storage import ConflictError


class DurabilityError(Exception):
    """Root of every error the durable layer raises."""


class RecoveryError(DurabilityError):
    """A durable stream cannot be folded back into a value (no base batch, bad batch)."""


class MemoError(DurabilityError, ValueError):
    """A memo call that cannot be honoured: bad name, no durable session, settled call."""


class LeaseHeldError(DurabilityError):
    """An operation's lease is held, unexpired, by another host: it is running there, so
    this host must not resume it. ``holder`` is the owner id, ``expires`` its wall-clock
    expiry (seconds since the epoch)."""

    def __init__(self, message: str, *, operation_id: str, holder: str, expires: float) -> None:
        super().__init__(message)
        self.operation_id = operation_id
        self.holder = holder
        self.expires = expires


class FencedError(DurabilityError, ConflictError):
    """A durable write refused because this host's lease on the operation was taken
    over: the stored fencing token is newer than the one the write carries. Nothing of
    the write was committed; the operation now belongs to ``holder`` (``None`` if it has
    since settled). Also a storage :class:`~toolfold.storage.ConflictError`."""

    def __init__(
        self,
        message: str,
        *,
        operation_id: str,
        owner: str,
        token: int,
        current_token: object,
        holder: str | None,
        conflict: ConflictError,
    ) -> None:
        ConflictError.__init__(
            self,
            message,
            address=conflict.address,
            expected=conflict.expected,
            found=conflict.found,
        )
        self.operation_id = operation_id
        self.owner = owner
        self.token = token
        self.current_token = current_token
        self.holder = holder
