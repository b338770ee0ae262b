"""The ``toolfold.exec`` span of one command and its spill metric (docs/observability.md).

Opened only when a tracer provider is configured (``toolfold._otel``); the caller checks
``_otel.tracer()`` first, so a command without one costs that check and nothing else.
The span is a child of whatever span is current in the task running the command (the
harness's ``execute_tool`` span when a tool runs it).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Protocol, TypeVar

from toolfold import _otel

from ._output_view import ShellOutputTruncation

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


class _Ended(Protocol):
    @property
    def exit_code(self) -> int | None: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def cancelled(self) -> bool: ...
    @property
    def handle(self) -> str | None: ...
    @property
    def truncation(self) -> ShellOutputTruncation: ...
    @property
    def spill_path(self) -> str | None: ...


R = TypeVar("R", bound=_Ended)


async def traced_exec(tracer: Tracer, where: str, run: Awaitable[R]) -> R:
    """Await ``run`` (one command) inside a ``toolfold.exec`` span; ``where`` is
    ``local`` or the remote transport's kind. The command text is not recorded (it may
    hold secrets)."""
    with _otel.span(
        tracer, "toolfold.exec", {"toolfold.exec.env": where}, internal=where == "local"
    ) as span:
        result = await run
        cut = result.truncation
        attributes: dict[str, _otel.AttrValue] = {
            "toolfold.exec.timed_out": result.timed_out,
            "toolfold.exec.cancelled": result.cancelled,
            "toolfold.exec.background": result.handle is not None,
            "toolfold.output.total_bytes": cut.total_bytes,
            "toolfold.output.total_lines": cut.total_lines,
            "toolfold.output.kept_bytes": cut.output_bytes,
            "toolfold.output.kept_lines": cut.output_lines,
            "toolfold.output.truncated": cut.truncated,
            "toolfold.output.spilled": result.spill_path is not None,
        }
        if result.exit_code is not None:
            attributes["process.exit.code"] = result.exit_code
        if where == "local" and result.spill_path is not None:
            # The spill file is this machine's (a remote one is the exec host's).
            size = spill_size(result.spill_path)
            if size is not None:
                attributes["toolfold.output.spill_bytes"] = size
        span.set_attributes(attributes)
    return result


def spill_size(path: str) -> int | None:
    """The size of a local spill file, or ``None`` when it cannot be read."""
    try:
        return os.stat(path, follow_symlinks=False).st_size
    except OSError:
        return None


def record_spill(meters: _otel.Meters, path: str | None) -> None:
    """Count a local command's spill file in ``toolfold.exec.spill.size``."""
    if path is not None:
        size = spill_size(path)
        if size is not None:
            meters.spill_size.record(size)
