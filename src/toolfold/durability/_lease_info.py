"""A lease as stored (:class:`LeaseInfo`), and whether the host that holds it is a
process of this machine that is gone (:func:`owner_gone`).

Apart from ``_leases`` because only reading a lease back needs them (a takeover, a
fenced write's error, finding orphaned operations): a call that takes its lease, runs
and settles never defines them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from toolfold._host import hostname

__all__ = ["LeaseInfo", "owner_gone"]


def owner_gone(owner: str) -> bool:
    """Whether ``owner`` is a :func:`default_host_id` (``hostname:pid``) of a process of
    this machine that no longer runs: its lease need not be waited out (``toolfold run``
    killed, or ended with its call unsettled, is resumed at once on its own machine).
    Any other host id, a live or unknowable pid, and this process itself: ``False``. A
    reused pid can only make a takeover wait for the expiry, and an early takeover is
    fenced like any other."""
    host, sep, pid = owner.rpartition(":")
    if not sep or host != hostname() or not pid.isdigit():
        return False
    number = int(pid)
    if number <= 0 or number == os.getpid():
        return False
    try:
        os.kill(number, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


@dataclass(frozen=True)
class LeaseInfo:
    """A lease as stored: ``owner`` host id, fencing ``token``, wall-clock ``expires``
    and last ``heartbeat`` (seconds since the epoch)."""

    owner: str
    token: int
    expires: float
    heartbeat: float

    def live(self, now: float) -> bool:
        """Whether the lease holds at ``now``: not expired, and its owner is not a
        process of this machine known to be gone (:func:`owner_gone`)."""
        return self.expires > now and not owner_gone(self.owner)
