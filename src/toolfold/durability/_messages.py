"""Durable assistant output: a message being generated is checkpointed like tool output
(``pending.assistant_output`` batches in its operation's scope); its settlement writes
the final message and retires the scope in one transaction; after a crash the
partial message is recovered and settled as interrupted, keeping what was generated."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from toolfold import _json
from toolfold.storage import Session, append_entry, ephemeral_scope, retire_scope, set_value

from ._addresses import operation_message, operation_meta, pending_assistant_output
from ._errors import DurabilityError
from ._recovery import recover
from ._stream import DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_REBASE_EVERY, DurableStream, OpSource

JSON = Any

ASSISTANT_KIND = "assistant"
"""``op.meta`` ``kind`` of an operation that holds one assistant message."""

INTERRUPTED_STOP = "interrupted"
"""``stop_reason`` of a message whose generation a crash (or a cancel) cut short."""


def message_entry(
    state: dict[str, JSON], *, message_id: str, run_id: str, turn_id: str, operation_id: str
) -> dict[str, JSON]:
    """The transcript entry of a settled assistant message."""
    return {
        **_json.loads(_json.dumps(state)),
        "role": "assistant",
        "message_id": message_id,
        "run_id": run_id,
        "turn_id": turn_id,
        "operation_id": operation_id,
    }


class DurableMessage:
    """One assistant message's durable side: its paced checkpoint stream and its
    settlement (final message + retirement of its operation scope, one transaction)."""

    def __init__(
        self,
        session: Session,
        operation_id: str,
        message_id: str,
        run_id: str,
        turn_id: str,
        stream: DurableStream,
    ) -> None:
        self.session = session
        self.operation_id = operation_id
        self.message_id = message_id
        self.run_id = run_id
        self.turn_id = turn_id
        self.stream = stream
        self.settled = False

    def notify(self) -> None:
        """The message changed: schedule a paced checkpoint."""
        self.stream.notify()

    async def settle(self, state: dict[str, JSON]) -> dict[str, JSON]:
        """Fence the stream, then ONE transaction: the message entry + retire_scope.
        Returns the entry written."""
        if self.settled:
            raise DurabilityError(
                f"message {self.message_id!r} is already settled; a message settles once"
            )
        await self.stream.aclose()
        entry = message_entry(
            state,
            message_id=self.message_id,
            run_id=self.run_id,
            turn_id=self.turn_id,
            operation_id=self.operation_id,
        )
        await self.session.commit(
            [append_entry(entry), retire_scope(ephemeral_scope(self.operation_id))]
        )
        self.settled = True
        return entry


@dataclass(frozen=True)
class PendingMessage:
    """An assistant message a crash left unsettled."""

    operation_id: str
    message_id: str
    run_id: str
    turn_id: str


async def start_message(
    session: Session,
    *,
    run_id: str,
    turn_id: str,
    message_id: str,
    source: OpSource,
    interval: float = DEFAULT_CHECKPOINT_INTERVAL,
    rebase_every: int = DEFAULT_REBASE_EVERY,
) -> DurableMessage:
    """Record a message about to be generated (its own operation, one transaction)
    and return its durable side, checkpointing ``source``."""
    operation_id = f"msg-{uuid.uuid4().hex[:16]}"
    meta: dict[str, JSON] = {
        "run_id": run_id,
        "after_seq": session.next_seq - 1,
        "kind": ASSISTANT_KIND,
    }
    record: dict[str, JSON] = {"message_id": message_id, "run_id": run_id, "turn_id": turn_id}
    await session.commit(
        [
            set_value(operation_meta(operation_id), meta),
            set_value(operation_message(operation_id, message_id), record),
        ]
    )
    stream = DurableStream(
        session,
        pending_assistant_output(operation_id, message_id),
        source,
        interval=interval,
        rebase_every=rebase_every,
    )
    return DurableMessage(session, operation_id, message_id, run_id, turn_id, stream)


async def pending_messages(session: Session) -> list[PendingMessage]:
    """Every assistant message left unsettled in the session."""
    found: list[PendingMessage] = []
    for scope in await session.live_scopes():
        op = scope.id
        meta = await session.get_value(operation_meta(op))
        if not isinstance(meta, dict) or meta.get("kind") != ASSISTANT_KIND:
            continue
        for _key, record in await session.scan_values("op.messages", f"{op}:", ephemeral_scope(op)):
            message_id = record.get("message_id") if isinstance(record, dict) else None
            if isinstance(record, dict) and isinstance(message_id, str):
                found.append(
                    PendingMessage(
                        op,
                        message_id,
                        str(record.get("run_id", meta.get("run_id", op))),
                        str(record.get("turn_id", "")),
                    )
                )
    return found


async def settle_interrupted_message(session: Session, pending: PendingMessage) -> dict[str, JSON]:
    """Settle a crashed message from its last checkpoint: what was generated is kept,
    ``stop_reason`` is ``"interrupted"`` and ``is_error`` is set. Returns the entry."""
    recovered = await recover(
        session, pending_assistant_output(pending.operation_id, pending.message_id)
    )
    state: dict[str, JSON] = (
        dict(recovered.value)
        if recovered is not None and isinstance(recovered.value, dict)
        else {"role": "assistant", "content": []}
    )
    state["stop_reason"] = INTERRUPTED_STOP
    state["is_error"] = True
    entry = message_entry(
        state,
        message_id=pending.message_id,
        run_id=pending.run_id,
        turn_id=pending.turn_id,
        operation_id=pending.operation_id,
    )
    await session.commit([append_entry(entry), retire_scope(ephemeral_scope(pending.operation_id))])
    return entry
