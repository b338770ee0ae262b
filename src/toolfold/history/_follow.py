"""Following a stored session live: the calls another process runs in it, as harness events.

``SessionFollower.poll()`` reads what changed in a session since its previous poll
and turns it into the events a lane folds: ``RunStart`` / ``ToolStart`` for a call
found running, ``ToolUpdate`` for each durable checkpoint batch it wrote (decoded, so
the first is the base ``["r", state]``), ``ToolEnd`` + ``ToolSettled`` when its result
entry lands, ``RunEnd`` when its operation scope is retired. An assistant message being
generated (``toolfold agent`` in another process) is followed the same way:
``MessageStart``, a ``MessageUpdate`` per checkpoint batch, then a last base update
with the settled message and ``MessageEnd``.

Every poll costs a few indexed reads, whatever the session's size: the live scopes,
the checkpoint lists after the last seq seen, and the transcript entries after the
last seq seen. Nothing is read whole.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from toolfold._host import hostname
from toolfold.chord import ChordError, Decoder
from toolfold.durability import pending_messages
from toolfold.harness import (
    Durability,
    HarnessEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    RunEnd,
    RunStart,
    ToolEnd,
    ToolSettled,
    ToolStart,
    ToolUpdate,
    pending_assistant_output,
    pending_tool_output,
)
from toolfold.storage import ListAddress, Session

from ._records import run_record_address

_PAGE = 256

SETTLED_RECORD_WAIT = 2.0
"""Seconds a settlement waits for its call's run record to gain the output's
``truncation`` totals (written right after the settlement by the host that ran it):
the final checkpoint may have been retired unread, and without those totals
followers would disagree on the settled state depending on when they read."""


@dataclass
class _Call:
    run_id: str
    turn_id: str
    tool_call_id: str
    address: ListAddress[Any]
    last_seq: int | None = None
    decoder: Decoder | None = None
    """``None`` until a base batch was decoded (deltas before it cannot be folded)."""
    message: bool = False
    """An assistant message (``tool_call_id`` is its message id), not a tool call."""


@dataclass
class _Operation:
    run_id: str
    calls: dict[str, _Call] = field(default_factory=dict)


class SessionFollower:
    """Turns one session's changes into harness events for a lane (see the module doc).

    ``start_seq`` is the session's seq when following began: results settled before it
    are history (the stored view shows them), not news. Calls this process runs itself
    (its own run record names this pid) are skipped: their events reach the lane from
    the harness that runs them.
    """

    def __init__(self, session: Session, lane: str, *, start_seq: int | None = None) -> None:
        self.session = session
        self.lane = lane
        self._entries_after = session.next_seq - 1 if start_seq is None else start_seq
        self._scopes: frozenset[str] = frozenset()
        self._ops: dict[str, _Operation] = {}
        self._messages: dict[str, _Call] = {}
        """Assistant messages being generated, by operation id."""
        self._held: dict[str, float] = {}
        """Settlements waiting for their run record's totals: tool call id -> deadline."""

    @property
    def holding(self) -> bool:
        """Whether a settlement waits for its run record (poll again soon: the record
        is written right after the settlement, or the wait ends by deadline)."""
        return bool(self._held)

    async def poll(self) -> list[HarnessEvent]:
        """The events for everything that changed since the previous poll."""
        events: list[HarnessEvent] = []
        scopes = frozenset(scope.id for scope in await self.session.live_scopes())
        if scopes != self._scopes:
            await self._operations(scopes, events)
            self._scopes = scopes
        for op in self._ops.values():
            for call in op.calls.values():
                await self._checkpoints(call, events)
        for message in self._messages.values():
            await self._checkpoints(message, events)
        await self._settled(events)
        # A result entry lands in the same transaction that retires its operation, and
        # the scopes were read first: every retired operation's results were read above.
        for op_id in [op for op in self._ops if op not in scopes]:
            if any(c in self._held for c in self._ops[op_id].calls):
                continue  # its settlement waits for the run record: the run goes on
            events.append(RunEnd(self._ops.pop(op_id).run_id))
        return events

    async def _operations(self, scopes: frozenset[str], events: list[HarnessEvent]) -> None:
        new = scopes - self._scopes
        if not new:
            return
        for found in await pending_messages(self.session):
            if found.operation_id in new and found.operation_id not in self._messages:
                ids = (found.run_id, found.turn_id, found.message_id)
                self._messages[found.operation_id] = _Call(
                    *ids,
                    pending_assistant_output(found.operation_id, found.message_id),
                    message=True,
                )
                events.append(MessageStart(*ids))
        for pending in await Durability(self.session).pending_operations():
            if pending.operation_id not in new or pending.operation_id in self._ops:
                continue
            op = _Operation(pending.run_id)
            for record in pending.calls:
                if record.invocation_id in pending.settled or await self._own(record.tool_call_id):
                    continue
                if not op.calls:
                    events.append(RunStart(pending.run_id, self.lane))
                op.calls[record.tool_call_id] = _Call(
                    record.run_id,
                    record.turn_id,
                    record.tool_call_id,
                    pending_tool_output(pending.operation_id, record.invocation_id),
                )
                events.append(
                    ToolStart(
                        record.run_id,
                        record.turn_id,
                        record.tool_call_id,
                        record.tool_name,
                        record.args,
                    )
                )
            if op.calls:
                self._ops[pending.operation_id] = op

    async def _own(self, tool_call_id: str) -> bool:
        record = await self.session.get_value(run_record_address(tool_call_id))
        return (
            isinstance(record, dict)
            and record.get("pid") == os.getpid()
            and record.get("host") == hostname()
        )

    async def _checkpoints(self, call: _Call, events: list[HarnessEvent]) -> None:
        if call.last_seq is None:
            # First sight: start from the latest base batch (older ones are superseded).
            elements = await self._from_latest_base(call.address)
        else:
            elements = []
            while True:
                page = await self.session.read_list(
                    call.address, cursor=call.last_seq, order="asc", limit=_PAGE
                )
                elements.extend(page)
                if len(page) < _PAGE:
                    break
                call.last_seq = page[-1].seq
        for element in elements:
            call.last_seq = element.seq
            if element.tag == "base":
                call.decoder = Decoder()
            if call.decoder is None:
                continue
            try:
                ops = call.decoder.decode(element.value)
            except ChordError:
                call.decoder = None  # wait for the next base batch
                continue
            update = MessageUpdate if call.message else ToolUpdate
            events.append(update(call.run_id, call.turn_id, call.tool_call_id, ops))

    async def _from_latest_base(self, address: ListAddress[Any]) -> list[Any]:
        tail: list[Any] = []
        cursor: int | None = None
        while True:
            page = await self.session.read_list(
                address, cursor=cursor, order="desc", limit=_PAGE, stop_at_tag="base"
            )
            tail.extend(page)
            if not page or page[-1].tag == "base" or len(page) < _PAGE:
                break
            cursor = page[-1].seq
        tail.reverse()
        return tail

    async def _settled(self, events: list[HarnessEvent]) -> None:
        calls = {c.tool_call_id: c for op in self._ops.values() for c in op.calls.values()}
        while True:
            entries = await self.session.read_entries(cursor=self._entries_after, limit=_PAGE)
            for entry in entries:
                message = entry.value
                if isinstance(message, dict) and message.get("role") == "assistant":
                    self._entries_after = entry.seq
                    self._message_settled(message, events)
                    continue
                if not isinstance(message, dict) or message.get("role") != "tool_result":
                    self._entries_after = entry.seq
                    continue
                tool_call_id = str(message.get("tool_call_id", ""))
                truncation: Any = None
                if tool_call_id in calls:
                    truncation = await self._settled_totals(tool_call_id)
                    if truncation is _WAIT:
                        return  # this entry again at the next poll, after the record
                self._entries_after = entry.seq
                call = calls.pop(tool_call_id, None)
                if call is None:
                    if await self._own(tool_call_id):
                        continue
                    # Settled between two polls: the transcript still gets it.
                    events.append(ToolSettled("", "", tool_call_id, message))
                    continue
                for op in self._ops.values():
                    op.calls.pop(tool_call_id, None)
                ids = (call.run_id, call.turn_id, call.tool_call_id)
                # The last checkpoint may have been retired with the scope before this
                # poll read it: the settled content and details are the final output.
                final = [
                    ["s", ["content"], message.get("content", [])],
                    ["s", ["details"], message.get("details", {})],
                ]
                if truncation is not None:
                    final.append(["s", ["truncation"], truncation])
                if call.decoder is not None:
                    events.append(ToolUpdate(*ids, final))
                events.append(ToolEnd(*ids, is_error=bool(message.get("is_error"))))
                events.append(ToolSettled(*ids, message))
            if len(entries) < _PAGE:
                return

    async def _settled_totals(self, tool_call_id: str) -> Any:
        """The settled output's ``truncation`` from the call's run record; ``_WAIT``
        while a host's record lacks it (it lands right after the settlement) and the
        wait is not over; ``None`` for a call without a record (a plain harness) or
        after the wait."""
        record = await self.session.get_value(run_record_address(tool_call_id))
        if isinstance(record, dict) and "truncation" in record:
            self._held.pop(tool_call_id, None)
            return record["truncation"]
        if isinstance(record, dict):
            deadline = self._held.setdefault(tool_call_id, time.monotonic() + SETTLED_RECORD_WAIT)
            if time.monotonic() < deadline:
                return _WAIT
        self._held.pop(tool_call_id, None)
        return None

    def _message_settled(self, entry: dict[str, Any], events: list[HarnessEvent]) -> None:
        call = self._messages.pop(str(entry.get("operation_id", "")), None)
        if call is None:
            return  # settled before following began, or between two polls unseen
        ids = (call.run_id, call.turn_id, call.tool_call_id)
        # The last checkpoint may have been retired with the scope unread: the
        # settled message is the final state, sent once as a base.
        state = {
            k: entry[k]
            for k in ("role", "content", "stop_reason", "is_error", "error", "usage")
            if k in entry
        }
        events.append(MessageUpdate(*ids, [["r", state]]))
        stop = entry.get("stop_reason")
        events.append(MessageEnd(*ids, stop_reason=str(stop), is_error=bool(entry.get("is_error"))))


_WAIT = object()

__all__ = ["SETTLED_RECORD_WAIT", "SessionFollower"]
