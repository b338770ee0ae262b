"""The one exception hierarchy of the framework adapters.

::

    Exception
     └── IntegrationError        anything an adapter refuses or reports

``ToolNotAvailableError`` (an unknown tool name) is the harness's, raised by
``ToolLoop``; it is re-exported here.
"""

from __future__ import annotations


class IntegrationError(Exception):
    """Root of every error raised by ``toolfold.integrations``."""
