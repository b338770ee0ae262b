"""A session's calls as the store holds them: settled results (transcript entries) and
unsettled calls (live operation scopes, with their recovered pending output), each with
the record its host kept beside it (``_records``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from toolfold.durability import Durability, pending_tool_output
from toolfold.storage import Session

from ._records import RUN_RECORD_NAMESPACE, run_record_address

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
        if isinstance(args, dict) and isinstance(args.get("started_by"), str):
            # A background command's output call, as its settled entry's ``what`` says.
            return f"{args.get('handle')} of {args['started_by']}: {args.get('command')}"
        if isinstance(args, dict) and isinstance(args.get("command"), str):
            return str(args["command"])
        if args is None and self.message is not None:
            # A settled call keeps a short description of its arguments (``what``).
            return str(self.message.get("what", ""))
        return "" if args is None else str(args)


async def list_calls(
    session: Session, *, last: int | None = None, messages: bool = True
) -> list[CallView]:
    """The calls of ``session``, numbered: settled ones in transcript order, then
    unsettled ones — all of them, or only the ``last`` N.

    Reads only what it returns: the settled calls come from the transcript's key index
    (``read_entries(keyed=True)``), newest first when ``last`` is given. With
    ``messages=False`` a settled call's ``message`` is its stored summary (the message
    without its ``content``), and no result is loaded at all.
    """
    settled_total, legacy = await _settled_total(session)
    pending = await _pending_calls(session, legacy)
    total = settled_total + len(pending)
    first = 1 if last is None else max(1, total - last + 1)
    calls: list[CallView] = []
    if first <= settled_total:
        if legacy is not None:
            calls = legacy[first - 1 :]
        else:
            want = settled_total - first + 1
            entries = await session.read_entries(
                order="desc", keyed=True, limit=want, summaries=not messages
            )
            calls = [_settled_view(e.value if messages else e.summary) for e in reversed(entries)]
    calls.extend(pending[max(0, first - 1 - settled_total) :])
    for number, call in enumerate(calls, start=first):
        call.number = number
    await _attach_records(session, calls, everything=first == 1)
    return calls


async def call_count(session: Session) -> tuple[int, int]:
    """``(calls, unsettled)`` of ``session``, without reading any result."""
    settled_total, legacy = await _settled_total(session)
    pending = await _pending_calls(session, legacy)
    return settled_total + len(pending), len(pending)


async def lookup_call(session: Session, wanted: str) -> list[CallView]:
    """The calls ``wanted`` names: its number (``1`` is the first call), its exact id, or
    else every call whose id starts with it (at most 6; more than one is ambiguous).
    Reads the index, then only the calls found."""
    settled_total, legacy = await _settled_total(session)
    pending = await _pending_calls(session, legacy)
    found: list[CallView] = []
    if wanted.isdigit() and 1 <= int(wanted) <= settled_total + len(pending):
        n = int(wanted)
        if n > settled_total:
            found = [pending[n - settled_total - 1]]
        elif legacy is not None:
            found = [legacy[n - 1]]
        else:
            [entry] = await session.read_entries(keyed=True, offset=n - 1, limit=1)
            found = [_settled_view(entry.value)]
        found[0].number = n
    else:
        for prefix in (False, True):
            if legacy is not None:
                settled = [
                    c
                    for c in legacy
                    if c.tool_call_id == wanted or (prefix and c.tool_call_id.startswith(wanted))
                ]
            elif wanted or prefix:
                entries = await session.entries_by_key(wanted, prefix=prefix, limit=6)
                settled = [_settled_view(e.value) for e in entries]
            else:
                settled = []
            ids = {c.tool_call_id for c in settled}
            found = settled + [
                c
                for c in pending
                if c.tool_call_id not in ids
                and (c.tool_call_id == wanted or (prefix and c.tool_call_id.startswith(wanted)))
            ]
            if found:
                # An exact id that several calls share (a framework reusing ``c1``) is as
                # ambiguous as a prefix: every match is returned, never the first alone.
                found = found[:6]
                break
    await _attach_records(session, found, everything=False)
    return found


async def _settled_total(session: Session) -> tuple[int, list[CallView] | None]:
    """How many calls have settled, and — only for a session holding unkeyed entries
    (written before entries had keys, or by another writer) — the settled calls found by
    reading every entry, the way it was done before the index existed."""
    keyed = await session.count_entries(keyed=True)
    if keyed == await session.count_entries():
        return keyed, None
    legacy: list[CallView] = []
    cursor: int | None = None
    while True:
        entries = await session.read_entries(cursor=cursor, limit=256)
        legacy.extend(
            _settled_view(e.value)
            for e in entries
            if isinstance(e.value, dict) and e.value.get("role") == "tool_result"
        )
        if len(entries) < 256:
            break
        cursor = entries[-1].seq
    return len(legacy), legacy


def _settled_view(message: Any) -> CallView:
    v = message if isinstance(message, dict) else {}
    return CallView(
        0,
        str(v.get("tool_call_id", "")),
        str(v.get("tool_name", "?")),
        True,
        v,
        operation_id=str(v["operation_id"]) if "operation_id" in v else None,
    )


async def _pending_calls(session: Session, legacy: list[CallView] | None) -> list[CallView]:
    """The calls of live operations that have not settled (live scopes only: a session
    whose operations all settled costs one read)."""
    calls: list[CallView] = []
    legacy_ids = None if legacy is None else {c.tool_call_id for c in legacy}
    for pending in await Durability(session).pending_operations():
        for record in pending.calls:
            if record.invocation_id in pending.settled:
                continue
            if legacy_ids is not None:
                if record.tool_call_id in legacy_ids:
                    continue
            elif await session.entries_by_key(record.tool_call_id, limit=1):
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
    return calls


async def _attach_records(session: Session, calls: list[CallView], *, everything: bool) -> None:
    """Each call's run record: one lookup per call, or one scan of the (small) records
    when the listing holds every call anyway."""
    if not everything or len(calls) <= 32:
        for call in calls:
            call.record = await session.get_value(run_record_address(call.tool_call_id))
        return
    records = dict(await session.scan_values(RUN_RECORD_NAMESPACE))
    for call in calls:
        call.record = records.get(call.tool_call_id)


async def pending_output(session: Session, call: CallView) -> Any:
    """The recovered output state of an unsettled call (as of its last durable batch),
    or ``None`` if it never checkpointed."""
    if call.operation_id is None:
        return None
    from toolfold.harness import recover  # here: recovery is no part of a run

    recovered = await recover(session, pending_tool_output(call.operation_id, call.tool_call_id))
    return None if recovered is None else recovered.value


__all__ = [
    "CallView",
    "call_count",
    "check_session_name",
    "list_calls",
    "lookup_call",
    "pending_output",
]
