"""The one exception hierarchy of the framework adapters.

::

    Exception
     └── IntegrationError        anything an adapter refuses or reports
          └── ToolNotAvailableError  a tool the framework cannot expose as asked
"""

from __future__ import annotations


class IntegrationError(Exception):
    """Root of every error raised by ``toolfold.integrations``."""


class ToolNotAvailableError(IntegrationError):
    """A tool name the loop does not have, or one a framework cannot add mid-run."""
