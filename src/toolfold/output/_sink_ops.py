"""``SinkOps``: how a ``ToolOutput``'s changes become op batches for its streams.

The sink owns its text slot (the window reports what it dropped and appended) and the
truncation totals; this base class stages those as ops, checks the details bound, flushes
the tracker and fans each batch out to the open streams. ``ToolOutput`` adds the writing
API and the lifecycle on top.
"""

from __future__ import annotations

from typing import Any

from toolfold import _json
from toolfold.chord import Op, Tracker

from ._cutnotice import cut_marker
from ._errors import OutputLimitError
from ._headtail import HeadTailWindow
from ._opstream import OpStream
from ._retention import OutputPolicy, TextWindow
from ._state import SinkState
from ._text_ops import MARKER_PATH, TAIL_PATH, TEXT_PATH, slot_ops, string_ops
from ._textwindow import TextDelta

_MIN_BACKLOG_BYTES = 64 * 1024
"""A stream's backlog may always grow to this before it collapses into a base batch."""

_STATE_OVERHEAD = 1024
"""Allowance for the small fields of the state when estimating its encoded size."""


class SinkOps:
    """The op side of a ``ToolOutput``: staging, flushing and fan-out (see the module doc).

    The attributes are set by ``ToolOutput.__init__``."""

    policy: OutputPolicy
    _window: TextWindow | HeadTailWindow
    _blocks: int
    _marker: str
    _lifecycle: SinkState
    _streams: list[OpStream]
    _failure: OutputLimitError | None
    _blocked: bool
    _text_dirty: bool
    _notice: str
    _footer: str
    _text_ops: list[Op]
    _suffix: str
    _replaced_from: str | None
    _replaced_head: str
    _image_bytes: int
    _details_good: bytes
    _tracker: Tracker

    def _visible(self) -> str:
        """The window's text as shown: under head_tail with the marker on its own line."""
        window = self._window
        if not isinstance(window, HeadTailWindow):
            return window.text
        return window.head + self._marker_line(self._marker_now()) + window.tail

    def _marker_now(self, state: Any = None) -> str:
        """The cut marker for the current totals and spill path ("" while nothing is cut)."""
        if state is None:
            state = self._tracker.target
        spill = state.get("spill_path")
        return cut_marker(self._window.truncation(), spill if isinstance(spill, str) else None)

    def _marker_line(self, marker: str) -> str:
        if not marker:
            return ""
        head = self._window.head if isinstance(self._window, HeadTailWindow) else ""
        return ("\n" if head and not head.endswith("\n") else "") + marker + "\n"

    def _blocks_now(self) -> list[dict[str, Any]]:
        """The text blocks for the current window and footer (as the replicas will hold
        them after the next flush)."""
        window = self._window
        if not isinstance(window, HeadTailWindow):
            return [{"type": "text", "text": window.text + self._suffix}]
        return [
            {"type": "text", "text": window.head},
            {"type": "text", "text": self._marker_line(self._marker)},
            {"type": "text", "text": window.tail + self._suffix},
        ]

    def _has_pending(self) -> bool:
        return self._text_dirty or bool(self._text_ops) or bool(self._tracker.dirty)

    def _current_target(self) -> Any:
        """The tracked state with its text brought up to date (see ``_stage``).

        Writing the plain target bypasses the tracker on purpose: this slot's ops are
        the sink's own (``_stage``), and the tracker never holds a record for it."""
        target = self._tracker.target
        content = target["content"]
        for i, block in enumerate(self._blocks_now()):
            if content[i]["text"] != block["text"]:
                content[i]["text"] = block["text"]
        return target

    def _stage(self) -> None:
        """Turn what the window (and the footer or notice) changed into pending text ops."""
        if isinstance(self._window, HeadTailWindow):
            self._stage_parts(self._window)
            return
        deltas = self._window.drain()
        suffix = self._footer + self._notice
        old_suffix = self._suffix
        if not deltas and suffix == old_suffix:
            return
        if self._replaced_from is not None:
            ops = string_ops(self._replaced_from, self._window.text + suffix)
            self._replaced_from = None
        else:
            window = self._window
            ops = slot_ops(TEXT_PATH, deltas, lambda: window.text, suffix, old_suffix)
        self._text_ops.extend(ops)
        self._suffix = suffix

    def _stage_parts(self, window: HeadTailWindow) -> None:
        """head_tail: the head only ever gets `a`, the marker one `s` when it changes, the
        tail `t` + `a` like a tail window (plus the footer, as on a single text)."""
        parts = window.drain()
        suffix = self._footer + self._notice
        old_suffix = self._suffix
        marker = self._marker_now()
        ops: list[Op] = []
        if self._replaced_from is not None:
            # A replace says nothing about what it kept: each part is diffed on its own
            # (an exec env's final Replace usually keeps the head and the tail as they are).
            old_head, head = self._replaced_head, window.head
            if head.startswith(old_head):
                if len(head) > len(old_head):
                    ops.append(["a", list(TEXT_PATH), head[len(old_head) :]])
            else:
                ops.append(["s", list(TEXT_PATH), head])
            if marker != self._marker:
                ops.append(["s", list(MARKER_PATH), self._marker_line(marker)])
            ops.extend(string_ops(self._replaced_from, window.tail + suffix, TAIL_PATH))
            self._replaced_from = None
        else:
            tail: list[TextDelta] = []
            for part, delta in parts:
                if part == 0:
                    ops.append([delta[0], list(TEXT_PATH), delta[1]])
                else:
                    tail.append(delta)
            if marker != self._marker:
                ops.append(["s", list(MARKER_PATH), self._marker_line(marker)])
            if tail or suffix != old_suffix:
                ops.extend(slot_ops(TAIL_PATH, tail, lambda: window.tail, suffix, old_suffix))
        self._marker = marker
        self._text_ops.extend(ops)
        self._suffix = suffix

    def _sync_text(self) -> None:
        self._stage()
        target = self._tracker.target
        truncation = self._window.truncation()
        current = target["truncation"]
        if current != truncation:
            # Like the text, the totals are the sink's own slot: it writes the plain
            # target and emits the `s` ops itself (no tracker records, no copies: the
            # values are scalars). A base batch reads the target, so it carries them.
            ops = self._text_ops
            for key, value in truncation.items():
                if current.get(key) != value or key not in current:
                    current[key] = value
                    ops.append(["s", ["truncation", key], value])
        self._text_dirty = False

    def _check_details(self) -> None:
        data = _json.dumps(self._tracker.target["details"])
        limit = self.policy.max_details_bytes
        if len(data) <= limit:
            self._details_good = data
            return
        # Roll back before anything is flushed, so the oversized value never leaves.
        self._tracker.state["details"] = _json.loads(self._details_good)
        if self._failure is None:
            self._blocked = True
            self._failure = OutputLimitError(
                f"tool details serialise to {len(data)} bytes, over max_details_bytes={limit}; "
                "details were rolled back to the last state that fitted "
                f"({len(self._details_good)} bytes). Keep details small (counts, a bounded "
                "list) and put bulk in the text, or raise OutputPolicy.max_details_bytes"
            )
        # No change notification here: this runs inside a flush (or right before
        # settlement), which carries the rollback itself; notifying would re-enter it.

    def _pump(self) -> None:
        """Move pending changes into the tracker, flush it, fan the batch out."""
        if self._lifecycle is SinkState.SETTLED:
            return
        if self._text_dirty:
            self._sync_text()
        if not self._tracker.dirty and not self._text_ops:
            return
        self._check_details()
        text_ops, self._text_ops = self._text_ops, []
        rest = self._tracker.flush() if self._tracker.dirty else []
        if rest and rest[0][0] == "r":
            # The tracker collapsed into a base: it carries the whole current state.
            rest[0][1]["content"][: self._blocks] = self._blocks_now()
            batch = rest
        else:
            batch = text_ops + rest
        if not batch or not self._streams:
            return
        size = len(_json.dumps(batch))
        limit = max(_MIN_BACKLOG_BYTES, self._state_bytes())
        for stream in self._streams:
            stream._feed(batch, size, limit)

    def _state_bytes(self) -> int:
        return (
            self._window.view_bytes + self._image_bytes + len(self._details_good) + _STATE_OVERHEAD
        )
