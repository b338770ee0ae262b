"""Storage addresses of durable output and operations (all in the operation's scope)."""

from __future__ import annotations

import re

from toolfold.storage import (
    EphemeralScope,
    ListAddress,
    ValueAddress,
    ephemeral_scope,
    list_address,
    value,
)

from ._errors import MemoError

#: What a memo name may be; compiled (and cached by ``re``) when a memo is first used.
_MEMO_NAME = r"[A-Za-z0-9_.\-/]{1,128}"


def pending_tool_output(operation_id: str, invocation_id: str) -> ListAddress[EphemeralScope]:
    """The durable op stream of one tool invocation (``list[WireOp[]]``, operation scope)."""
    return list_address(
        "pending.tool_output", f"{operation_id}:{invocation_id}", ephemeral_scope(operation_id)
    )


def pending_assistant_output(operation_id: str, entry_id: str) -> ListAddress[EphemeralScope]:
    """The durable op stream of one assistant message being generated (operation scope)."""
    return list_address(
        "pending.assistant_output", f"{operation_id}:{entry_id}", ephemeral_scope(operation_id)
    )


def operation_tool_memo(
    operation_id: str, invocation_id: str, name: str
) -> ValueAddress[EphemeralScope]:
    """A tool's memo ``name`` for one invocation; in the operation scope so that it can
    commit in one transaction with the invocation's output checkpoint."""
    return value(
        "op.tool_memo", f"{operation_id}:{invocation_id}:{name}", ephemeral_scope(operation_id)
    )


def operation_memo_seed(operation_id: str, invocation_id: str) -> ValueAddress[EphemeralScope]:
    """The base batch committed with the invocation's latest memo (its replay seed)."""
    return value(
        "op.tool_memo_seed", f"{operation_id}:{invocation_id}", ephemeral_scope(operation_id)
    )


def operation_call(operation_id: str, invocation_id: str) -> ValueAddress[EphemeralScope]:
    """What a resuming harness needs to re-run or settle one call (name, args, ids)."""
    return value("op.calls", f"{operation_id}:{invocation_id}", ephemeral_scope(operation_id))


def operation_message(operation_id: str, message_id: str) -> ValueAddress[EphemeralScope]:
    """What settling an assistant message after a crash needs (its ids)."""
    return value("op.messages", f"{operation_id}:{message_id}", ephemeral_scope(operation_id))


def operation_meta(operation_id: str) -> ValueAddress[EphemeralScope]:
    """Operation-level metadata (run id, the session seq the operation started after)."""
    return value("op.meta", operation_id, ephemeral_scope(operation_id))


def validate_memo_name(name: object) -> str:
    """Return ``name`` if it is a valid memo name, else raise :class:`MemoError`."""
    if not isinstance(name, str) or re.fullmatch(_MEMO_NAME, name) is None:
        raise MemoError(
            f"invalid memo name {name!r}: use 1-128 characters from A-Z a-z 0-9 _ . - /"
        )
    return name
