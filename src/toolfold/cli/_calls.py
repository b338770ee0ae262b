"""What a session holds, as the CLI lists it (see :mod:`toolfold.history`, shared with
the server), and finding one call by number, id or id prefix."""

from __future__ import annotations

from toolfold._units import plural
from toolfold.history import (
    RUN_RECORD_NAMESPACE,
    CallView,
    call_count,
    list_calls,
    lookup_call,
    pending_output,
    process_alive,
    run_record,
    run_record_address,
)
from toolfold.storage import Session

from ._errors import UnknownCallError

__all__ = [
    "RUN_RECORD_NAMESPACE",
    "CallView",
    "call_count",
    "find_call",
    "list_calls",
    "pending_output",
    "process_alive",
    "run_record",
    "run_record_address",
]


async def find_call(session: Session, wanted: str) -> CallView:
    """The call named by ``wanted``: its list number, its id, or a unique id prefix —
    found through the session's index, without reading the other calls."""
    found = await lookup_call(session, wanted)
    if len(found) == 1:
        return found[0]
    name = session.name
    if len(found) > 1:
        if all(c.tool_call_id == wanted for c in found):
            raise UnknownCallError(
                f"call {wanted!r} is ambiguous in session {name!r}: "
                f"{plural(len(found), 'call')} have that id; give its number "
                f"(see `toolfold show {name}`)"
            )
        ids = ", ".join(c.tool_call_id for c in found[:5])
        raise UnknownCallError(
            f"call {wanted!r} is ambiguous in session {name!r} (matches {ids}); give more of the id"
        )
    total, _ = await call_count(session)
    raise UnknownCallError(
        f"no call {wanted!r} in session {name!r} ({plural(total, 'call')}); "
        f"see `toolfold show {name}` for numbers and ids"
    )
