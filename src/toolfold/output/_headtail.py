"""``HeadTailWindow``: the beginning and a rolling end of a text, cut in the middle.

``retain="head_tail"`` keeps the text whole while it fits both caps. Once it does
not, the view is the head view of everything written under the head's share of the
caps (``OutputPolicy.head_share``) and the tail view under the rest, with a marker
between them that the sink renders (``cut_marker``). The rule is the exec env's
``head_tail_window``; this is its incremental form:

- the head part takes writes until its caps are full, then never changes again;
- everything after it goes to a tail-mode ``TextWindow`` with no caps until the
  text stops fitting, then with the tail's caps: from there it rolls exactly like a
  tail window (``t`` + ``a``), and it is the tail view of the whole text because the
  two parts cannot meet once the text is over the caps.

The sink keeps the parts in three text blocks (head, marker, tail) so that each
changes by its own small op; ``drain`` reports the head's and the tail's changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from toolfold.execenv import head_tail_caps, head_window, last_line_bytes, utf8_len

from ._retention import OutputPolicy
from ._textwindow import TextDelta, TextWindow, clean_text

if TYPE_CHECKING:
    from ._state import Truncation

__all__ = ["HeadTailWindow"]

_UNBOUNDED = 1 << 62
"""The rolling part's caps while the whole text fits: it is never cut before that."""


class HeadTailWindow:
    """Head part + rolling tail part of one sink's text, with exact totals."""

    # The sink's inlined park is for tail windows only (``parks`` is never true here;
    # the other three exist so the sink's per-line path needs no type test).
    parks = False

    def __init__(self, policy: OutputPolicy) -> None:
        self._max_bytes = policy.max_bytes
        self._max_lines = policy.max_lines
        self._caps = head_tail_caps(policy.max_bytes, policy.max_lines, policy.head_share)
        self.parked: list[str] = []
        self.parked_chars = 0
        self.park_limit = 0
        self._captured: Truncation | None = None
        self._cut_at = 0  # a source's head length (characters), from its metadata
        self._reset()

    def _reset(self) -> None:
        self._head: list[str] = []
        self._head_joined: str | None = ""
        self._head_bytes = 0
        self._head_newlines = 0
        self._head_full = False
        self._head_fresh: list[str] = []  # appended to the head since the last drain
        self._replaced = True  # replicas hold nothing to build on
        self._rest = TextWindow(
            OutputPolicy(retain="tail", max_bytes=_UNBOUNDED, max_lines=_UNBOUNDED)
        )
        self._cut = False
        self._cut_by: Literal["lines", "bytes"] = "bytes"
        self._total_bytes = 0
        self._total_newlines = 0
        self._last_line_bytes = 0

    # -- writing -----------------------------------------------------------------

    def write(self, text: str) -> None:
        """Append ``text`` (lone surrogates become U+FFFD)."""
        if not text:
            return
        text = clean_text(text)
        if self._captured is not None:
            # The source split it already: its metadata says where its head ends.
            room = self._cut_at - len(self._head_text())
            if room > 0:
                self._head_append(text[:room])
                text = text[room:]
            if text:
                self._rest.write(text)
            return
        self._count(text)
        if not self._head_full:
            text = self._fill_head(text)
        if text:
            self._rest.write(text)
        if not self._cut and not self._fits():
            self._start_cut()

    def _count(self, text: str) -> None:
        size = utf8_len(text)
        newlines = text.count("\n")
        self._total_bytes += size
        self._total_newlines += newlines
        if not newlines:
            self._last_line_bytes += size
        else:
            self._last_line_bytes = last_line_bytes(text)

    def _fill_head(self, text: str) -> str:
        """Put what fits of ``text`` in the head; return the rest."""
        head_bytes, head_lines, _, _ = self._caps
        kept, _ = head_window(text, head_bytes - self._head_bytes, head_lines - self._head_newlines)
        if len(kept) < len(text):
            self._head_full = True
        if kept:
            self._head_append(kept)
        return text[len(kept) :]

    def _head_append(self, text: str) -> None:
        self._head.append(text)
        self._head_bytes += utf8_len(text)
        self._head_newlines += text.count("\n")
        self._head_fresh.append(text)
        self._head_joined = None

    def _fits(self) -> bool:
        lines = self._total_newlines + (1 if self._last_line_bytes else 0)
        return self._total_bytes <= self._max_bytes and lines <= self._max_lines

    def _start_cut(self) -> None:
        self._cut = True
        head = self._head_text()
        # Which cap the whole text broke first, as a head view of it would say (decided
        # now for good: the text only grows). The rolling part is still uncut here.
        self._cut_by = head_window(head + self._rest.text, self._max_bytes, self._max_lines)[1]
        _, _, tail_bytes, tail_lines = self._caps
        # The rolling part continues the head's last line when the head ends inside one.
        self._rest.retarget(tail_bytes, tail_lines, partial=bool(head) and head[-1] != "\n")

    def slide(self, drop: int, text: str) -> None:
        """A source's ``Slide`` of its tail part: drop ``drop`` characters of it, append."""
        self._rest.slide(drop, clean_text(text))

    def replace(self, text: str) -> None:
        """Make ``text`` (already cleaned) the whole output so far; from a source, split
        where its metadata says its head ends."""
        captured, cut_at = self._captured, self._cut_at
        self._reset()
        self._captured, self._cut_at = captured, cut_at
        if captured is not None:
            self._head_append(text[:cut_at])
            self._cut = bool(captured.get("truncated"))
            if self._cut:
                self._rest.retarget(self._caps[2], self._caps[3], partial=False)
            self._rest.write(text[cut_at:])
            return
        self.write(text)

    def capture(self, truncation: Truncation, cut_at: int) -> None:
        """Adopt source-owned totals; ``cut_at`` is where its view's head part ends."""
        self._rest.settle()
        self._captured = truncation
        self._cut_at = cut_at
        if truncation.get("truncated") and not self._cut:
            self._cut = True
            self._rest.retarget(self._caps[2], self._caps[3], partial=False)

    def settle(self) -> None:
        """Window any parked writes of the rolling part now."""
        self._rest.settle()

    # -- what changed --------------------------------------------------------------

    def drain(self) -> list[tuple[int, TextDelta]]:
        """``(part, delta)`` since the last drain: part 0 is the head, 2 the tail (the
        sink's block numbers; 1 is its marker)."""
        out: list[tuple[int, TextDelta]] = []
        if self._replaced:
            out.append((0, ("s", self._head_text())))
        elif self._head_fresh:
            out.append((0, ("a", "".join(self._head_fresh))))
        out.extend((2, delta) for delta in self._rest.drain())
        self._replaced = False
        self._head_fresh = []
        return out

    # -- reading -------------------------------------------------------------------

    def _head_text(self) -> str:
        if self._head_joined is None:
            self._head_joined = "".join(self._head)
            self._head[:] = [self._head_joined]
        return self._head_joined

    @property
    def head(self) -> str:
        """The head part."""
        return self._head_text()

    @property
    def tail(self) -> str:
        """The rolling part (everything after the head while the text fits)."""
        return self._rest.text

    @property
    def cut(self) -> bool:
        """Whether the middle was cut (a marker belongs between the parts)."""
        return self._cut

    @property
    def text(self) -> str:
        """Head and tail, without the marker (the window's own text)."""
        return self._head_text() + self._rest.text

    @property
    def view_bytes(self) -> int:
        """UTF-8 bytes of both parts."""
        return self._head_bytes + self._rest.view_bytes

    def truncation(self) -> Truncation:
        """The ``truncation`` record: the usual fields plus ``cut_line`` (the first line,
        1-based, not wholly shown before the cut), ``cut_lines`` and ``cut_bytes``."""
        head = self._head_text()
        open_line = bool(head) and head[-1] != "\n"
        lines = self._head_newlines + (1 if open_line else 0) + self._rest.view_lines
        if open_line and not self._cut and self._rest.view_bytes:
            lines -= 1  # uncut, the rolling part continues the head's last line
        view_bytes = self.view_bytes
        if self._captured is not None:
            result = dict(self._captured)
            result["output_lines"] = lines
            result["output_bytes"] = view_bytes
            return result  # type: ignore[return-value]
        total_lines = self._total_newlines + (1 if self._last_line_bytes else 0)
        cut_line = cut_lines = cut_bytes = 0
        partial = False
        by: Literal["lines", "bytes"] | None = None
        if self._cut:
            partial = self._rest.partial
            cut_line = self._head_newlines + 1
            # A partial tail is a piece of the last line: it shows no whole line.
            last = total_lines - (0 if partial else self._rest.view_lines)
            cut_lines = max(last - cut_line + 1, 0)
            cut_bytes = self._total_bytes - view_bytes
            by = self._cut_by
        return {
            "truncated": self._cut,
            "truncated_by": by,
            "total_lines": total_lines,
            "total_bytes": self._total_bytes,
            "output_lines": lines,
            "output_bytes": view_bytes,
            "last_line_partial": partial,
            "first_line_exceeds_limit": self._cut and "\n" not in head,
            "max_lines": self._max_lines,
            "max_bytes": self._max_bytes,
            "last_line_bytes": self._last_line_bytes,
            "cut_line": cut_line,
            "cut_lines": cut_lines,
            "cut_bytes": cut_bytes,
        }

    # -- resuming ------------------------------------------------------------------

    def seed(self, head: str, tail: str, truncation: Truncation) -> None:
        """Resume from a recovered state: its two parts and its totals."""
        self._reset()
        if not truncation.get("truncated"):
            self.write(head + tail)
            return
        self._head_append(head)
        self._head_full = True
        self._cut = True
        self._cut_by = truncation.get("truncated_by") or "bytes"
        self._rest.retarget(self._caps[2], self._caps[3], partial=False)
        self._rest.write(tail)
        self._total_bytes = int(truncation["total_bytes"])
        last = int(truncation.get("last_line_bytes", last_line_bytes(tail)))
        self._last_line_bytes = last
        self._total_newlines = int(truncation["total_lines"]) - (1 if last else 0)
