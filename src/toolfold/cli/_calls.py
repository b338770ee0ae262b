"""What a session holds, as the CLI lists it: settled calls (transcript entries) and
unsettled ones (live operation scopes, with their recovered pending output)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from toolfold.harness import Durability, pending_tool_output, recover
from toolfold.storage import SESSION, Session, ValueAddress, set_value, value

from ._errors import UnknownCallError

RUN_RECORD_NAMESPACE = "cli.run"
"""Session-scope values the CLI writes per ``toolfold run`` call (command, process,
spill directory), keyed by tool call id."""


def run_record_address(tool_call_id: str) -> ValueAddress[Any]:
    """Where the CLI keeps what it knows about one ``run`` call."""
    return value(RUN_RECORD_NAMESPACE, tool_call_id, SESSION)


def run_record(tool_call_id: str, command: str, spill_dir: str, started_at: str) -> Any:
    """The write that records a ``run`` call before it starts (owner process included,
    so ``resume`` can refuse to settle a call whose process is still alive)."""
    return set_value(
        run_record_address(tool_call_id),
        {
            "command": command,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "spill_dir": spill_dir,
            "started_at": started_at,
        },
    )


def process_alive(record: Any) -> bool:
    """Whether the process that recorded ``record`` still runs on this host.

    A pid can be reused after its process died; a false "alive" only makes ``resume``
    refuse (safe), never settles a call that still runs.
    """
    if not isinstance(record, dict) or record.get("host") != socket.gethostname():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class CallView:
    """One call of a session as ``show`` prints it."""

    number: int
    tool_call_id: str
    tool_name: str
    settled: bool
    message: dict[str, Any] | None
    """The settled ``ToolResultMessage`` (``None`` while unsettled)."""
    args: Any = None
    operation_id: str | None = None
    record: Any = None
    """The CLI's run record (command, pid, ...), when the call came from ``toolfold run``."""

    @property
    def status(self) -> str:
        """``ok`` / ``error`` / ``cancelled`` / ``interrupted`` / ``unsettled``."""
        if self.message is None:
            return "unsettled"
        return str(self.message.get("outcome", "error" if self.message.get("is_error") else "ok"))

    @property
    def summary(self) -> str:
        """A short description of what the call did (its command, or its arguments)."""
        if isinstance(self.record, dict) and isinstance(self.record.get("command"), str):
            return str(self.record["command"])
        args = self.args
        if isinstance(args, dict) and isinstance(args.get("command"), str):
            return str(args["command"])
        return "" if args is None else str(args)


async def list_calls(session: Session) -> list[CallView]:
    """Every call in ``session``: settled ones in transcript order, then unsettled ones."""
    calls: list[CallView] = []
    seen: set[str] = set()
    cursor: int | None = None
    while True:
        entries = await session.read_entries(cursor=cursor, limit=256)
        for entry in entries:
            v = entry.value
            if not isinstance(v, dict) or v.get("role") != "tool_result":
                continue
            call_id = str(v.get("tool_call_id", ""))
            seen.add(call_id)
            calls.append(
                CallView(
                    0,
                    call_id,
                    str(v.get("tool_name", "?")),
                    True,
                    v,
                    operation_id=str(v["operation_id"]) if "operation_id" in v else None,
                )
            )
        if len(entries) < 256:
            break
        cursor = entries[-1].seq
    for pending in await Durability(session).pending_operations():
        for record in pending.calls:
            if record.invocation_id in pending.settled or record.tool_call_id in seen:
                continue
            calls.append(
                CallView(
                    0,
                    record.tool_call_id,
                    record.tool_name,
                    False,
                    None,
                    args=record.args,
                    operation_id=pending.operation_id,
                )
            )
    for number, call in enumerate(calls, start=1):
        call.number = number
        call.record = await session.get_value(run_record_address(call.tool_call_id))
    return calls


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


async def pending_output(session: Session, call: CallView) -> Any:
    """The recovered output state of an unsettled call (as of its last durable batch),
    or ``None`` if it never checkpointed."""
    if call.operation_id is None:
        return None
    recovered = await recover(session, pending_tool_output(call.operation_id, call.tool_call_id))
    return None if recovered is None else recovered.value
