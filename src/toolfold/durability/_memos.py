"""Memos: a memo and its output checkpoint commit in ONE transaction."""

from __future__ import annotations

from typing import Any, Final

from toolfold.storage import Write, delete_list, delete_value, set_value

from ._addresses import operation_memo_seed, operation_tool_memo, validate_memo_name
from ._errors import MemoError
from ._stream import DurableStream

JSON = Any


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()
"""Returned by ``get_memo`` for a memo that was never set (distinct from ``None``)."""


async def commit_memo(
    stream: DurableStream,
    operation_id: str,
    invocation_id: str,
    name: str,
    memo: JSON,
) -> None:
    """Commit ``[set/delete memo, base-batch checkpoint, memo seed]`` in ONE transaction.

    The memo invariant: the tool did X, wrote X's output to the sink, *then*
    memoises "did X" — so the checkpoint computed here (inside the session line) already
    holds X's output. Two ordered commits would not do: memo-then-checkpoint loses X's
    output on a crash between them, checkpoint-then-memo duplicates it. Every address is
    in the operation scope, so this is one single-file transaction.
    """
    validate_memo_name(name)
    if stream.fenced:
        raise MemoError(
            f"set_memo({name!r}) after invocation {invocation_id!r} was settled; memos "
            "can only be written while the tool runs"
        )
    memo_address = operation_tool_memo(operation_id, invocation_id, name)
    seed_address = operation_memo_seed(operation_id, invocation_id)

    def plan() -> list[Write]:
        if stream.fenced:
            raise MemoError(
                f"set_memo({name!r}) raced with the settlement of invocation "
                f"{invocation_id!r}; the memo was not written"
            )
        checkpoint = stream.plan_batch(base=True)
        if checkpoint is None:
            raise MemoError(f"the output of invocation {invocation_id!r} has no state to seed")
        wire = checkpoint.element
        memo_write = (
            delete_value(memo_address)
            if memo is None or memo is MISSING
            else set_value(memo_address, memo)
        )
        # A base: the batches before it are dead (see DurableStream.plan).
        return [memo_write, delete_list(stream.address), checkpoint, set_value(seed_address, wire)]

    try:
        await stream.commit(plan)
    except MemoError:
        raise
    except BaseException:
        stream.lost()
        raise
