"""``HeadTailCapture``: the start and a rolling end of a command's output, cut in the middle.

``retain="head_tail"`` is the other two modes put together, so it is built from them:
three ``OutputCapture``s read the same bytes — a head view under the whole caps (it
says whether the output still fits, and is the view while it does), a head view under
the head's share of the caps and a tail view under the rest (``head_tail_caps``). Each
is already exact, chunk-independent and bounded; the two head captures stop decoding
once their view is decided and the tail one skips what cannot reach its view, so after
the first window's worth of output the cost is the tail mode's.

The view is ``head + tail`` with ``cut_at`` (in the truncation record) saying where
the head ends; while the output fits, it is the whole output, split at the same place.
The marker between the parts is the consumer's to render (the output sink does).
"""

from __future__ import annotations

from toolfold._record import replace

from ._capture import CaptureSnapshot, OutputCapture
from ._limits import ShellOutputLimits
from ._updates import utf8_len
from ._window import count_lines, head_tail_caps


class HeadTailCapture:
    """Feeds raw bytes, keeps a head part and a rolling tail part plus exact totals.

    The interface is ``OutputCapture``'s (``feed``, ``close``, ``snapshot``, totals)."""

    def __init__(self, limits: ShellOutputLimits) -> None:
        self.limits = limits
        head_bytes, head_lines, tail_bytes, tail_lines = head_tail_caps(
            limits.max_bytes, limits.max_lines, limits.head_share
        )
        self._whole = OutputCapture(
            ShellOutputLimits(max_bytes=limits.max_bytes, max_lines=limits.max_lines, retain="head")
        )
        self._head = OutputCapture(
            ShellOutputLimits(max_bytes=head_bytes, max_lines=head_lines, retain="head")
        )
        self._tail = OutputCapture(
            ShellOutputLimits(max_bytes=tail_bytes, max_lines=tail_lines, retain="tail")
        )

    def feed(self, data: bytes) -> None:
        """Add raw output bytes."""
        self._whole.feed(data)
        self._head.feed(data)
        self._tail.feed(data)

    def close(self) -> None:
        """End of output (see ``OutputCapture.close``)."""
        self._whole.close()
        self._head.close()
        self._tail.close()

    @property
    def closed(self) -> bool:
        """True after ``close()``."""
        return self._whole.closed

    @property
    def total_bytes(self) -> int:
        """Raw bytes so far."""
        return self._whole.total_bytes

    @property
    def total_lines(self) -> int:
        """Raw lines so far; a final line without newline counts."""
        return self._whole.total_lines

    @property
    def exceeds_cap(self) -> bool:
        """True when the output so far is beyond the limits (what starts the spill)."""
        return self._whole.exceeds_cap

    def snapshot(self) -> CaptureSnapshot:
        """The view: head + tail, ``truncation.cut_at`` where the head ends. ``start`` is
        where the part after the head starts in the cleaned stream (to detect slides)."""
        whole = self._whole.snapshot()
        head = self._head.snapshot().text
        line, col = head.count("\n"), len(head) - head.rfind("\n") - 1
        if not whole.truncation.truncated:
            return replace(
                whole,
                start=(line, col),
                truncation=replace(whole.truncation, cut_at=len(head)),
            )
        tail = self._tail.snapshot()
        text = head + tail.text
        total = whole.truncation
        output_bytes = utf8_len(text)
        cut_line = line + 1
        # A partial tail is a piece of the last line: it shows no whole line.
        partial = tail.truncation.last_line_partial
        last_cut = total.total_lines - (0 if partial else count_lines(tail.text))
        truncation = replace(
            total,
            output_lines=count_lines(head) + count_lines(tail.text),
            output_bytes=output_bytes,
            last_line_partial=partial,
            first_line_exceeds_limit="\n" not in head,
            cut_at=len(head),
            cut_line=cut_line,
            cut_lines=max(last_cut - cut_line + 1, 0),
            cut_bytes=max(total.total_bytes - output_bytes, 0),
        )
        return CaptureSnapshot(
            text=text,
            start=tail.start,
            truncation=truncation,
            last_line_bytes=whole.last_line_bytes,
        )


def capture_for(limits: ShellOutputLimits | None = None) -> OutputCapture | HeadTailCapture:
    """The capture for ``limits``: a ``HeadTailCapture`` for ``retain="head_tail"``, else
    an ``OutputCapture``."""
    if limits is not None and limits.retain == "head_tail":
        return HeadTailCapture(limits)
    return OutputCapture(limits)
