"""A session's calls as the store holds them: settled results (transcript entries),
unsettled calls (live operation scopes, with their recovered pending output), and the
per-call records hosts keep beside them."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolfold.harness import Durability, pending_tool_output, recover
from toolfold.storage import SESSION, Session, ValueAddress, set_value, value

_SESSION_NAME = re.compile(r"[A-Za-z0-9._-]{1,128}")


def check_session_name(name: str) -> str | None:
    """Why ``name`` cannot name a session, or ``None`` if it can.

    The storage layer's rule (1-128 characters of ``A-Z a-z 0-9 . _ -``, not starting
    with ``.``: safe as a file name everywhere), checked up front so a host can refuse
    a bad name in its own words before it touches the store.
    """
    if _SESSION_NAME.fullmatch(name) is None or name.startswith("."):
        return (
            f"invalid session name {name!r}: use 1-128 characters of A-Z a-z 0-9 . _ - "
            "not starting with '.'"
        )
    return None


RUN_RECORD_NAMESPACE = "cli.run"
"""Session-scope values written per command a host runs (``toolfold run``, ``toolfold
serve``): command, process, spill directory, keyed by tool call id. The name predates
the server and is kept: stores written by earlier versions use it."""


def run_record_address(tool_call_id: str) -> ValueAddress[Any]:
    """Where a host keeps what it knows about one command it ran."""
    return value(RUN_RECORD_NAMESPACE, tool_call_id, SESSION)


def new_run_record(command: str, spill_dir: str, started_at: str) -> dict[str, Any]:
    """The record of a command about to start (this process is its owner)."""
    return {
        "command": command,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "spill_dir": spill_dir,
        "started_at": started_at,
    }


def run_record(tool_call_id: str, command: str, spill_dir: str, started_at: str) -> Any:
    """The write that records a command before it starts (owner process included,
    so ``resume`` can refuse to settle a call whose process is still alive)."""
    return set_value(
        run_record_address(tool_call_id), new_run_record(command, spill_dir, started_at)
    )


def settled_record(tool_call_id: str, record: Mapping[str, Any], state: Mapping[str, Any]) -> Any:
    """The write that completes ``record`` once the call settled: the output's
    ``truncation`` totals and ``spill_path``.

    A ``ToolResultMessage`` keeps only what the model sees (content, details), and the
    operation scope holding the live state is retired at settlement; this record is how
    a reader of the store can still say "showing N of M lines / full output at PATH".
    It is written after settlement (not in the same transaction): a crash in between
    only loses that indicator, never the result.
    """
    done = dict(record)
    if state.get("truncation") is not None:
        done["truncation"] = state["truncation"]
    if isinstance(state.get("spill_path"), str):
        done["spill_path"] = state["spill_path"]
    return set_value(run_record_address(tool_call_id), done)


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
    """The host's run record (command, pid, ...), when the call came from ``toolfold run``
    or ``toolfold serve``."""

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


async def pending_output(session: Session, call: CallView) -> Any:
    """The recovered output state of an unsettled call (as of its last durable batch),
    or ``None`` if it never checkpointed."""
    if call.operation_id is None:
        return None
    recovered = await recover(session, pending_tool_output(call.operation_id, call.tool_call_id))
    return None if recovered is None else recovered.value


__all__ = [
    "RUN_RECORD_NAMESPACE",
    "CallView",
    "check_session_name",
    "list_calls",
    "new_run_record",
    "pending_output",
    "process_alive",
    "run_record",
    "run_record_address",
    "settled_record",
]
