"""The durable description of one call (:class:`CallRecord`): what an operation's start
records of each of its calls, enough to resume it."""

from __future__ import annotations

from typing import Any

from toolfold._record import field, record

from ._errors import RecoveryError

__all__ = ["CallRecord"]

JSON = Any


@record
class CallRecord:
    """The durable description of one call, enough to resume it."""

    operation_id: str
    invocation_id: str
    tool_name: str
    tool_call_id: str
    args: JSON
    run_id: str
    turn_id: str
    extra: dict[str, JSON] = field(default_factory=dict)

    def to_json(self) -> dict[str, JSON]:
        """The stored form."""
        return {
            "operation_id": self.operation_id,
            "invocation_id": self.invocation_id,
            "tool_name": self.tool_name,
            "tool_call_id": self.tool_call_id,
            "args": self.args,
            "run_id": self.run_id,
            "turn_id": self.turn_id,
            **({"extra": self.extra} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, data: JSON, where: str) -> CallRecord:
        """Parse the stored form; :class:`RecoveryError` naming ``where`` if malformed."""
        try:
            return cls(
                operation_id=str(data["operation_id"]),
                invocation_id=str(data["invocation_id"]),
                tool_name=str(data["tool_name"]),
                tool_call_id=str(data["tool_call_id"]),
                args=data.get("args"),
                run_id=str(data["run_id"]),
                turn_id=str(data["turn_id"]),
                extra=dict(data.get("extra") or {}),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise RecoveryError(f"malformed call record at {where}: {data!r:.120}") from exc
