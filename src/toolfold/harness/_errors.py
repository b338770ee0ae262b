"""The one exception hierarchy of the harness.

::

    Exception
     └── HarnessError                 anything the harness refuses or reports
          ├── ToolDefinitionError      a malformed tool definition (also a ValueError)
          ├── ToolError                raised BY a tool: a clean, model-visible failure
          ├── MemoUnavailableError     memos used without a durable session attached
          ├── SubscriberOverflowError  an event subscriber fell too far behind and was dropped
          ├── BusClosedError           an event was published on a closed bus
          └── ToolNotAvailableError    a tool name a loop does not have (or cannot add)

A tool may raise anything (that is how it fails); ``ToolError`` only tells the
harness the message is written for the model, so no exception type is prefixed.
"""

from __future__ import annotations


class HarnessError(Exception):
    """Root of every error raised by ``toolfold.harness``."""


class ToolDefinitionError(HarnessError, ValueError):
    """Raised when a ``Tool`` is defined wrongly (bad name, params not a pydantic model,
    execute not an ``async def``, duplicate names in one harness)."""


class ToolError(HarnessError):
    """Raise from a tool to fail with a message written for the model.

    The message is appended to the output already written, as is; any other
    exception is appended as ``"<Type>: <message>"``.
    """


class MemoUnavailableError(HarnessError):
    """Raised by ``ToolContext.get_memo`` / ``set_memo`` when no durable session is
    attached to the harness (memos only make sense when output is durable)."""


class SubscriberOverflowError(HarnessError):
    """Raised from an event subscription whose queue overflowed: the subscriber was
    dropped rather than silently lose events. Resubscribe (and refold from a base)."""


class BusClosedError(HarnessError):
    """Raised when publishing on an ``EventBus`` after ``close()``."""


class ToolNotAvailableError(HarnessError, ValueError):
    """A tool name a ``ToolLoop`` does not have, or one a framework cannot add mid-run."""
