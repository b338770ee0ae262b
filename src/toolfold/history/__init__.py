"""toolfold.history — what a session store holds, call by call, for the CLI and the server.

A session's calls are its settled tool results (transcript entries) and the calls its
live operations left unsettled (with their recovered pending output). Hosts that run
commands through a durable harness (``toolfold run``, ``toolfold serve``) also keep a
small per-call record in the session scope — the command, the owner process, the spill
directory and, once settled, the output's truncation totals and spill file — so readers
can show the command, refuse to resume a call that is still running, and say "showing N
of M lines / full output at PATH" for a settled call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._lazy import lazy_exports

from ._records import (
    RUN_RECORD_NAMESPACE,
    mark_activity,
    new_run_record,
    process_alive,
    run_record,
    run_record_address,
    settled_record,
)

if TYPE_CHECKING:
    from ._calls import (
        CallView,
        call_count,
        check_session_name,
        list_calls,
        lookup_call,
        pending_output,
    )
    from ._follow import SessionFollower

# The run records are all that `toolfold run` needs: it reads no session's calls. The
# readers (``_calls``: the durability layer and the harness's recovery) and the follower
# (the server's live view of a store, with the lanes) are imported on first use.
__getattr__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "CallView",
                "call_count",
                "check_session_name",
                "list_calls",
                "lookup_call",
                "pending_output",
            ],
            "._calls",
        ),
        "SessionFollower": "._follow",
    },
)

__all__ = [
    "RUN_RECORD_NAMESPACE",
    "CallView",
    "SessionFollower",
    "call_count",
    "check_session_name",
    "list_calls",
    "lookup_call",
    "mark_activity",
    "new_run_record",
    "pending_output",
    "process_alive",
    "run_record",
    "run_record_address",
    "settled_record",
]
