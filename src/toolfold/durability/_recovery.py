"""Recovery: fold a durable stream (latest base + deltas) back into its value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from toolfold.chord import ChordError, Decoder, apply, is_base
from toolfold.storage import ListAddress, Session

from ._addresses import operation_memo_seed
from ._errors import RecoveryError

JSON = Any

#: Page size for reading a durable list backwards during recovery.
RECOVERY_PAGE: Final = 64


@dataclass(frozen=True)
class RecoveredStream:
    """The value of a durable stream as of its last durable batch."""

    value: JSON
    batches: int
    """How many batches were decoded (the base batch plus the deltas after it)."""
    base_seq: int
    last_seq: int


async def recover(
    session: Session, address: ListAddress[Any], *, page: int = RECOVERY_PAGE
) -> RecoveredStream | None:
    """Fold a durable stream back into its value; ``None`` if nothing was ever written.

    Reads the list backwards, a page at a time, stopping at the latest base batch
    (``stop_at_tag="base"``), then decodes forward with a **fresh** decoder and applies.
    No tool code runs: only the six-verb applier, so a tool rewritten between crash and
    resume cannot make a persisted stream unreadable.
    """
    tail: list[Any] = []
    cursor: int | None = None
    while True:
        chunk = await session.read_list(
            address, cursor=cursor, order="desc", limit=page, stop_at_tag="base"
        )
        tail.extend(chunk)
        if not chunk or chunk[-1].tag == "base" or len(chunk) < page:
            break
        cursor = chunk[-1].seq
    if not tail:
        return None
    if tail[-1].tag != "base":
        raise RecoveryError(
            f"{address} holds {len(tail)} batches but no base batch; the stream's first "
            "durable batch must be a base batch — the list was written by something else "
            "or truncated at the front"
        )
    decoder = Decoder()
    state: JSON = None
    for element in reversed(tail):
        try:
            state = apply(state, decoder.decode(element.value))
        except ChordError as exc:
            raise RecoveryError(
                f"cannot fold batch seq {element.seq} of {address}: {exc}; the stream is "
                "corrupt after its last base batch"
            ) from exc
    return RecoveredStream(state, len(tail), tail[-1].seq, tail[0].seq)


def decode_base(wire: JSON, where: str) -> JSON:
    """Decode one stored base batch into its value."""
    if not isinstance(wire, list) or not is_base(wire):
        raise RecoveryError(f"{where} does not hold a base batch (got {str(wire)[:80]!r})")
    try:
        return apply(None, Decoder().decode(wire))
    except ChordError as exc:
        raise RecoveryError(f"cannot decode the base batch in {where}: {exc}") from exc


async def load_memo_seed(session: Session, operation_id: str, invocation_id: str) -> JSON:
    """The invocation's state as committed with its latest memo, or ``None`` if it never
    memoised (a replay then starts from scratch)."""
    address = operation_memo_seed(operation_id, invocation_id)
    wire = await session.get_value(address)
    if wire is None:
        return None
    return decode_base(wire, str(address))
