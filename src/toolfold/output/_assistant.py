"""``AssistantOutput``: an assistant message being generated, as a tracked value.

The same shape as tool output: a Chord tracker holds the message, every delta the
model streams (text, thinking, tool-call arguments) becomes an op on it, and any
number of consumers (the live publisher, the durable checkpointer) each take the
ops since their own last take, the first take being a base batch. Folding those
batches with ``chord.apply`` gives the message, so nothing is resent at the end.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypedDict

from toolfold import _json
from toolfold.chord import Tracker, track

from ._errors import OutputClosedError

Op = list[Any]

#: A backlog larger than the message itself (or than this) collapses into a base batch.
_MIN_BACKLOG_BYTES = 64 * 1024


class AssistantMessageState(TypedDict, total=False):
    """The message: ``content`` parts in order (``text``, ``thinking``, ``tool_call``
    with its argument text as it streams), then how it ended."""

    role: Literal["assistant"]
    content: list[dict[str, Any]]
    stop_reason: str | None
    is_error: bool
    error: str
    usage: dict[str, Any]


class MessageStream:
    """One consumer's feed of an ``AssistantOutput``'s ops (see ``OpStream``)."""

    __slots__ = ("_backlog", "_backlog_bytes", "_base", "_closed", "_owner")

    def __init__(self, owner: AssistantOutput) -> None:
        self._owner = owner
        self._backlog: list[Op] = []
        self._backlog_bytes = 0
        self._base = True
        self._closed = False

    @property
    def dirty(self) -> bool:
        """True when the next ``take()`` would return ops."""
        if self._closed:
            return False
        return self._base or bool(self._backlog) or bool(self._owner._tracker.dirty)

    def take(self) -> list[Op]:
        """Ops since this stream's last take (a base batch first or after a rebase)."""
        if self._closed:
            raise OutputClosedError("take() on a closed MessageStream; open a new one")
        self._owner._pump()
        if self._base:
            self._base = False
            self._backlog, self._backlog_bytes = [], 0
            return [["r", _json.loads(_json.dumps(self._owner._tracker.target))]]
        ops, self._backlog, self._backlog_bytes = self._backlog, [], 0
        return ops

    def rebase(self) -> None:
        """Make the next ``take()`` a base batch (drops the backlog)."""
        self._base = True
        self._backlog, self._backlog_bytes = [], 0

    def close(self) -> None:
        """Stop receiving ops."""
        if not self._closed:
            self._closed = True
            self._backlog = []
            self._owner._streams.remove(self)

    def _feed(self, batch: list[Op], size: int, limit: int) -> None:
        if self._base:
            return
        self._backlog.extend(batch)
        self._backlog_bytes += size
        if self._backlog_bytes > limit:
            self.rebase()


class AssistantOutput:
    """An assistant message being generated (see the module docstring).

    ``text``, ``thinking`` and ``tool_call`` take the model's deltas as they come;
    ``end`` records how the message ended and freezes it. ``seed`` (a recovered
    state) starts from what a crashed generation had already produced.
    """

    def __init__(self, seed: AssistantMessageState | None = None) -> None:
        initial: dict[str, Any] = {
            "role": "assistant",
            "content": [],
            "stop_reason": None,
            "is_error": False,
        }
        if seed is not None:
            initial.update(_json.loads(_json.dumps(seed)))
        self._tracker: Tracker = track(initial)
        self._streams: list[MessageStream] = []
        self._listeners: list[Callable[[], None]] = []
        self._calls: dict[int, int] = {}
        for position, part in enumerate(initial["content"]):
            if part.get("type") == "tool_call" and isinstance(part.get("index"), int):
                self._calls[part["index"]] = position
        self._chars = len(_json.dumps(initial))
        self._ended = initial.get("stop_reason") is not None

    # -- deltas ---------------------------------------------------------------------------

    def _check_open(self, what: str) -> None:
        if self._ended:
            raise OutputClosedError(f"{what} after the message ended; start a new message")

    def _last(self, kind: str) -> dict[str, Any] | None:
        content = self._tracker.state["content"]
        if len(content) and content[len(content) - 1]["type"] == kind:
            part: dict[str, Any] = content[len(content) - 1]
            return part
        return None

    def _append(self, kind: str, key: str, delta: str) -> None:
        if not isinstance(delta, str):
            raise TypeError(f"{kind} delta must be a str, got {type(delta).__name__}")
        if not delta:
            return
        part = self._last(kind)
        if part is None:
            self._tracker.state["content"].append({"type": kind, key: delta})
        else:
            part[key] += delta
        self._changed(len(delta))

    def text(self, delta: str) -> None:
        """Append answer text (a new text part after a part of another kind)."""
        self._check_open("text()")
        self._append("text", "text", delta)

    def thinking(self, delta: str) -> None:
        """Append reasoning text."""
        self._check_open("thinking()")
        self._append("thinking", "thinking", delta)

    def tool_call(
        self, index: int, *, id: str | None = None, name: str | None = None, arguments: str = ""
    ) -> None:
        """A tool-call delta: the call at stream position ``index`` is created on first
        sight; ``id`` and ``name`` are set when given, ``arguments`` text is appended."""
        self._check_open("tool_call()")
        content = self._tracker.state["content"]
        position = self._calls.get(index)
        if position is None:
            self._calls[index] = len(content)
            content.append(
                {
                    "type": "tool_call",
                    "index": index,
                    "id": id or "",
                    "name": name or "",
                    "arguments": arguments,
                }
            )
            self._changed(len(arguments) + 64)
            return
        part = content[position]
        if id and part["id"] != id:
            part["id"] = id
        if name and part["name"] != name:
            part["name"] = name
        if arguments:
            part["arguments"] += arguments
        self._changed(len(arguments))

    def usage(self, usage: dict[str, Any]) -> None:
        """Set the message's usage as the model reported it."""
        self._tracker.state["usage"] = dict(usage)
        self._changed(64)

    def end(self, stop_reason: str, *, is_error: bool = False, error: str | None = None) -> None:
        """Record how the message ended (``error`` is kept next to the partial content)."""
        self._check_open("end()")
        state = self._tracker.state
        state["stop_reason"] = stop_reason
        if is_error:
            state["is_error"] = True
        if error is not None:
            state["error"] = error
        self._ended = True
        self._changed(len(error or "") + 32)

    # -- reading --------------------------------------------------------------------------

    @property
    def ended(self) -> bool:
        """Whether ``end`` was called."""
        return self._ended

    def snapshot(self) -> AssistantMessageState:
        """A copy of the current message."""
        copied: AssistantMessageState = _json.loads(_json.dumps(self._tracker.target))
        return copied

    @property
    def text_so_far(self) -> str:
        """The answer text (every text part, in order)."""
        return "".join(
            p["text"] for p in self._tracker.target["content"] if p.get("type") == "text"
        )

    def open_stream(self) -> MessageStream:
        """A new, independent op feed (its first take is a base batch)."""
        stream = MessageStream(self)
        self._streams.append(stream)
        return stream

    def on_change(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener()`` after every change; returns a remover."""
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def _changed(self, size: int) -> None:
        self._chars += size
        for listener in list(self._listeners):
            listener()

    def _pump(self) -> None:
        if not self._tracker.dirty:
            return
        batch = self._tracker.flush()
        if not batch or not self._streams:
            return
        size = len(_json.dumps(batch))
        limit = max(_MIN_BACKLOG_BYTES, self._chars)
        for stream in self._streams:
            stream._feed(batch, size, limit)
