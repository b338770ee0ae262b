"""The one exception hierarchy of the reference agent loop.

::

    Exception
     └── AgentError       the model's stream failed (the partial message is kept)
"""

from __future__ import annotations


class AgentError(Exception):
    """Raised when the model's stream fails or is malformed; the partial assistant
    message is kept (settled with ``is_error``) before this is raised."""
