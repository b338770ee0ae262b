"""What a session holds, as the CLI lists it (see :mod:`toolfold.history`, shared with
the server), and finding one call by number, id or id prefix."""

from __future__ import annotations

from toolfold.history import (
    RUN_RECORD_NAMESPACE,
    CallView,
    list_calls,
    pending_output,
    process_alive,
    run_record,
    run_record_address,
)

from ._errors import UnknownCallError

__all__ = [
    "RUN_RECORD_NAMESPACE",
    "CallView",
    "find_call",
    "list_calls",
    "pending_output",
    "process_alive",
    "run_record",
    "run_record_address",
]


def find_call(calls: list[CallView], wanted: str, session_name: str) -> CallView:
    """The call named by ``wanted``: its list number, its id, or a unique id prefix."""
    if wanted.isdigit() and 1 <= int(wanted) <= len(calls):
        return calls[int(wanted) - 1]
    exact = [c for c in calls if c.tool_call_id == wanted]
    if exact:
        return exact[0]
    prefixed = [c for c in calls if c.tool_call_id.startswith(wanted)]
    if len(prefixed) == 1:
        return prefixed[0]
    if len(prefixed) > 1:
        ids = ", ".join(c.tool_call_id for c in prefixed[:5])
        raise UnknownCallError(
            f"call {wanted!r} is ambiguous in session {session_name!r} (matches {ids}); "
            "give more of the id"
        )
    raise UnknownCallError(
        f"no call {wanted!r} in session {session_name!r} ({len(calls)} calls); "
        f"see `toolfold show {session_name}` for numbers and ids"
    )
