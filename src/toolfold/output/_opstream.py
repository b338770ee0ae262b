"""``OpStream``: one consumer's feed of a sink's ops, taken at the consumer's own cadence."""

from __future__ import annotations

from typing import Any, Protocol

from toolfold import _json
from toolfold.chord import Op

from ._errors import OutputClosedError

__all__ = ["OpStream"]


class OpSource(Protocol):
    """What a stream needs of its sink (``ToolOutput``): a protocol, not an import, so
    that the sink depends on its streams and not the other way round."""

    _streams: list[OpStream]

    def _has_pending(self) -> bool: ...
    def _pump(self) -> None: ...
    def _current_target(self) -> Any: ...


class OpStream:
    """One consumer's feed of the sink's ops, taken at the consumer's own cadence.

    The live publisher and the durable checkpointer each open their own stream on
    the same sink. ``take()`` returns every op since this stream's previous take;
    the first take (and the first after ``rebase()``) is a base batch
    ``[["r", state]]``. A backlog that grows beyond about the size of the state is
    collapsed into a base batch, so an idle consumer costs bounded memory.

    Ops are shared between streams and must be treated as immutable (Chord's
    ``apply`` copies payloads, so folding them never aliases).
    """

    __slots__ = ("_backlog", "_backlog_bytes", "_base", "_closed", "_sink", "last_take_bytes")

    def __init__(self, sink: OpSource) -> None:
        self._sink = sink
        self._backlog: list[Op] = []
        self._backlog_bytes = 0
        self._base = True
        self._closed = False
        self.last_take_bytes = 0
        """Encoded size (JSON bytes) of what the last ``take()`` returned."""

    @property
    def dirty(self) -> bool:
        """True when the next ``take()`` would return ops."""
        if self._closed:
            return False
        return self._base or bool(self._backlog) or self._sink._has_pending()

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    def take(self) -> list[Op]:
        """Ops since this stream's last take (a base batch first or after a rebase)."""
        if self._closed:
            raise OutputClosedError(
                "take() on a closed OpStream; open a new stream with sink.open_stream()"
            )
        self._sink._pump()
        if self._base:
            self._base = False
            self._backlog = []
            self._backlog_bytes = 0
            data = _json.dumps(self._sink._current_target())
            self.last_take_bytes = len(data) + 8
            return [["r", _json.loads(data)]]
        ops, self._backlog = self._backlog, []
        self.last_take_bytes, self._backlog_bytes = self._backlog_bytes, 0
        return ops

    def rebase(self) -> None:
        """Make the next ``take()`` a base batch (drops the backlog)."""
        self._base = True
        self._backlog = []
        self._backlog_bytes = 0

    def close(self) -> None:
        """Stop receiving ops (the sink forgets this stream)."""
        if not self._closed:
            self._closed = True
            self._backlog = []
            self._sink._streams.remove(self)

    def _feed(self, batch: list[Op], size: int, limit: int) -> None:
        if self._base:
            return  # the next take is a base batch, which already includes this
        self._backlog.extend(batch)
        self._backlog_bytes += size
        if self._backlog_bytes > limit:
            self.rebase()
