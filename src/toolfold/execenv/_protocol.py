"""The exec-host wire format: JSON lines, one message per line, both directions.

Host → client: ``hello`` (first line, always), then per request id ``update``
(a bounded ``ShellOutputUpdate``), ``result`` or ``error``. Client → host: ``hello``,
``exec``, ``call`` (a file operation), ``bg`` (an operation on a background command:
read, write, signal, stop, list, resize), ``cancel``. Closing the host's stdin ends
everything: its commands' process groups are killed and it exits.

Only this module knows field names; both sides go through it.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ._background import BackgroundInfo, BackgroundRead
from ._errors import (
    BackgroundLimitError,
    CallbackError,
    ExecConfigError,
    ExecError,
    ExecStartError,
    HandleError,
    ProtocolError,
    SpillError,
)
from ._exec_result import ShellExecResult
from ._limits import DEFAULT_MAX_SPILL, CaptureOptions, ShellOutputLimits
from ._output_view import ShellOutputTruncation
from ._updates import Replace, update_from_dict, update_to_dict
from ._window import DEFAULT_HEAD_SHARE

PROTOCOL_VERSION = 2
"""Bumped on any change either side could misread; a mismatch is refused at the handshake."""

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest message either side accepts. An update carries at most one window (the CLI
caps a window at 16 MiB); JSON escaping can at most about quadruple it."""

ERROR_KINDS: dict[str, type[ExecError]] = {
    "ExecStartError": ExecStartError,
    "SpillError": SpillError,
    "CallbackError": CallbackError,
    "ExecConfigError": ExecConfigError,
    "BackgroundLimitError": BackgroundLimitError,
    "HandleError": HandleError,
    "ExecError": ExecError,
}
"""Errors of the host's ``LocalExecEnv`` that are raised again, as the same class, here."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line (UTF-8; newlines inside strings are escaped by JSON)."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One received line as a message; ``ProtocolError`` quotes the start of a bad one."""
    try:
        message = json.loads(line)
    except ValueError:
        message = None
    except RecursionError:
        # Nesting deeper than the interpreter's recursion limit: refused like any other
        # bad line, never a traceback that ends the process.
        raise ProtocolError(
            f"a JSON message nested too deep to read (the protocol's messages are flat), "
            f"starting {line[:40]!r}"
        ) from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise ProtocolError(
            f"expected a JSON message with an 'op' from the exec host, got {line[:120]!r}"
        )
    return message


def capture_to_dict(options: CaptureOptions) -> dict[str, Any]:
    limits = options.limits
    return {
        "max_bytes": limits.max_bytes,
        "max_lines": limits.max_lines,
        "retain": limits.retain,
        "head_share": limits.head_share,
        "spill": options.spill,
        "min_interval": options.min_interval,
        "target_rate": options.target_rate,
        "spill_high_water": options.spill_high_water,
        "max_spill": options.max_spill,
    }


def capture_from_dict(d: Any) -> CaptureOptions:
    """Raises ``ExecConfigError`` (from the options' own checks) for a bad field."""
    if not isinstance(d, dict):
        raise ExecConfigError(f"exec 'capture' must be an object, got {d!r}")
    try:
        return CaptureOptions(
            limits=ShellOutputLimits(
                max_bytes=d["max_bytes"],
                max_lines=d["max_lines"],
                retain=d["retain"],
                # Optional on the wire: a client from before head_tail does not send it.
                head_share=d.get("head_share", DEFAULT_HEAD_SHARE),
            ),
            spill=bool(d["spill"]),
            min_interval=d["min_interval"],
            target_rate=d["target_rate"],
            spill_high_water=d["spill_high_water"],
            max_spill=d.get("max_spill", DEFAULT_MAX_SPILL),
        )
    except KeyError as exc:
        raise ExecConfigError(f"exec 'capture' lacks the field {exc.args[0]!r}") from exc


_RESULT_FLAGS = ("timed_out", "cancelled", "background_killed")


def result_to_dict(result: ShellExecResult) -> dict[str, Any]:
    # A Replace of the final view carries text + metadata in the update vocabulary's
    # own (already lossless, already checked) encoding.
    d: dict[str, Any] = {
        "exit_code": result.exit_code,
        "view": update_to_dict(Replace(result.view)),
    }
    d.update({flag: getattr(result, flag) for flag in _RESULT_FLAGS})
    d["handle"] = result.handle
    return d


def result_from_dict(d: Any) -> ShellExecResult:
    try:
        view = update_from_dict(d["view"])
        exit_code = d["exit_code"]
        flags = {flag: d[flag] for flag in _RESULT_FLAGS}
        handle = d.get("handle")
    except (KeyError, TypeError, ExecError) as exc:
        raise ProtocolError(f"malformed exec result from the exec host: {exc}") from exc
    if (
        not isinstance(view, Replace)
        or not (
            exit_code is None or (isinstance(exit_code, int) and not isinstance(exit_code, bool))
        )
        or not (handle is None or isinstance(handle, str))
    ):
        raise ProtocolError(f"malformed exec result from the exec host: {str(d)[:200]}")
    return ShellExecResult.from_view(
        view.output,
        exit_code=exit_code,
        timed_out=bool(flags["timed_out"]),
        cancelled=bool(flags["cancelled"]),
        background_killed=bool(flags["background_killed"]),
        handle=handle,
    )


def error_to_dict(request_id: int, error: BaseException) -> dict[str, Any]:
    kind = type(error).__name__ if type(error).__name__ in ERROR_KINDS else "ExecError"
    return {"op": "error", "id": request_id, "kind": kind, "message": str(error)}


def error_from_dict(d: dict[str, Any], where: str) -> ExecError:
    cls = ERROR_KINDS.get(str(d.get("kind")), ExecError)
    return cls(f"{d.get('message', 'the exec host reported an error')} (on {where})")


def bg_read_to_dict(read: BackgroundRead) -> dict[str, Any]:
    d = dataclasses.asdict(read)
    return d


def bg_read_from_dict(d: Any) -> BackgroundRead:
    try:
        fields = dict(d)
        fields["truncation"] = ShellOutputTruncation(**fields["truncation"])
        read = BackgroundRead(**fields)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(
            f"malformed background read from the exec host: {exc}; {str(d)[:200]}"
        ) from exc
    if not isinstance(read.handle, str) or not isinstance(read.text, str):
        raise ProtocolError(f"malformed background read from the exec host: {str(d)[:200]}")
    return read


def bg_info_from_dict(d: Any) -> BackgroundInfo:
    try:
        return BackgroundInfo(**dict(d))
    except (TypeError, ValueError) as exc:
        raise ProtocolError(
            f"malformed background command from the exec host: {exc}; {str(d)[:200]}"
        ) from exc
