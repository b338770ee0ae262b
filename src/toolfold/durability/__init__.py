"""Durable op streams: paced checkpoints, recovery, atomic memos, settlement.

The durability layer sits on storage (where batches go), chord (the op codec) and
output (the sink's op streams); it knows nothing of the harness. The harness
plugs it into the call lifecycle (``toolfold.harness.DurableHooks``), and a
loop that runs tools one at a time passes ``durability=Durability(session)`` to
``execute_tool_call``.

- ``DurableStream``: one encoded Chord batch per durable write of any op source,
  paced, with periodic base batches and a fence (``_stream``);
- ``recover``: the latest base plus the deltas after it, folded back into a value
  (``_recovery``);
- ``commit_memo``: a memo and a base-batch checkpoint in one transaction (``_memos``);
- ``Durability`` / ``DurableOperation``: operations, call records, settlement that
  retires the operation scope with its last call, pending operations (``_operations``);
- ``acquire_lease`` / ``Lease``: which host runs an operation, with a fencing token
  every durable write of the operation carries (``_leases``);
- ``start_message`` / ``DurableMessage``: an assistant message being generated,
  checkpointed the same way, settled (or, after a crash, settled as interrupted)
  in one transaction with the retirement of its scope (``_messages``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from toolfold._lazy import lazy_exports

from ._addresses import (
    operation_call,
    operation_memo_seed,
    operation_message,
    operation_meta,
    operation_tool_memo,
    pending_assistant_output,
    pending_tool_output,
    validate_memo_name,
)
from ._calls import CallRecord
from ._errors import DurabilityError, FencedError, LeaseHeldError, MemoError, RecoveryError
from ._leases import (
    DEFAULT_LEASE_TTL,
    Lease,
    LeaseTerms,
    acquire_lease,
    default_host_id,
    lease_holder,
    lease_info,
    lease_token,
    read_lease,
)
from ._memos import MISSING, commit_memo
from ._operations import (
    Durability,
    DurableInvocation,
    DurableOperation,
    result_entry,
    settle_writes,
    settlement_writes,
    start_writes,
)
from ._stream import (
    DEFAULT_CHECKPOINT_INTERVAL,
    DEFAULT_REBASE_EVERY,
    DurableStream,
    OpSource,
    StreamPlanner,
    StreamStats,
    TrackerSource,
)

if TYPE_CHECKING:
    from ._lease_info import LeaseInfo, owner_gone
    from ._messages import (
        INTERRUPTED_STOP,
        DurableMessage,
        PendingMessage,
        message_entry,
        pending_messages,
        settle_interrupted_message,
        start_message,
    )
    from ._pending import PendingOperation
    from ._recovery import RECOVERY_PAGE, RecoveredStream, decode_base, load_memo_seed, recover

# Recovery (reading a stream back after a crash), an assistant message's durable
# stream, a lease as read back and a pending operation as found are imported on first
# use: a call that runs and settles needs none of them.
__getattr__ = lazy_exports(
    __name__,
    {
        "LeaseInfo": "._lease_info",
        "owner_gone": "._lease_info",
        "PendingOperation": "._pending",
        "INTERRUPTED_STOP": "._messages",
        "DurableMessage": "._messages",
        "PendingMessage": "._messages",
        "message_entry": "._messages",
        "pending_messages": "._messages",
        "settle_interrupted_message": "._messages",
        "start_message": "._messages",
        "RECOVERY_PAGE": "._recovery",
        "RecoveredStream": "._recovery",
        "decode_base": "._recovery",
        "load_memo_seed": "._recovery",
        "recover": "._recovery",
    },
)

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_REBASE_EVERY",
    "INTERRUPTED_STOP",
    "MISSING",
    "RECOVERY_PAGE",
    "CallRecord",
    "Durability",
    "DurabilityError",
    "DurableInvocation",
    "DurableMessage",
    "DurableOperation",
    "DurableStream",
    "FencedError",
    "Lease",
    "LeaseHeldError",
    "LeaseInfo",
    "LeaseTerms",
    "MemoError",
    "OpSource",
    "PendingMessage",
    "PendingOperation",
    "RecoveredStream",
    "RecoveryError",
    "StreamPlanner",
    "StreamStats",
    "TrackerSource",
    "acquire_lease",
    "commit_memo",
    "decode_base",
    "default_host_id",
    "lease_holder",
    "lease_info",
    "lease_token",
    "load_memo_seed",
    "message_entry",
    "operation_call",
    "operation_memo_seed",
    "operation_message",
    "operation_meta",
    "operation_tool_memo",
    "owner_gone",
    "pending_assistant_output",
    "pending_messages",
    "pending_tool_output",
    "read_lease",
    "recover",
    "result_entry",
    "settle_interrupted_message",
    "settle_writes",
    "settlement_writes",
    "start_message",
    "start_writes",
    "validate_memo_name",
]
