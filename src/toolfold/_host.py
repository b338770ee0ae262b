"""This machine's host name (:func:`hostname`), without importing :mod:`socket`.

Lease owners (``hostname:pid``), history records and the agent's registry name the
host that wrote them; a CLI process that never opens a socket should not pay ~1.3 ms
to import :mod:`socket` for it. On POSIX ``os.uname().nodename`` is the value
``socket.gethostname()`` returns (both are the kernel's node name); elsewhere it falls
back to :mod:`socket`. Not cached, like ``socket.gethostname()``: a renamed host is
seen at once. Imports nothing else from toolfold, so every layer may use it.
"""

from __future__ import annotations

import os

__all__ = ["hostname"]


def hostname() -> str:
    """The host name, as ``socket.gethostname()`` gives it."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket

    return socket.gethostname()
