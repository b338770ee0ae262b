"""Retention: the ``OutputPolicy`` a tool declares and the head/tail text window.

The window is applied *before* the tracked text is mutated, so a rolling tail
reaches the tracker as "drop a prefix, append a suffix" (Chord ``t`` + ``a``),
never as a whole-window set. Totals are exact over everything written.

The window rule itself (what a head or tail view keeps, which cap cut it, when the
first line exceeds the limit) is the exec env's (``toolfold.execenv._window``): shell
output and a tool's own text are cut by one implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from toolfold.execenv import (
    count_lines,
    head_first_line_exceeds,
    head_window,
    last_line_bytes,
    tail_truncated_by,
    tail_window,
    utf8_len,
)

from ._errors import OutputPolicyError
from ._state import Truncation

__all__ = [
    "OutputPolicy",
    "Retain",
    "TextWindow",
    "clean_text",
    "count_lines",
    "head_window",
    "last_line_bytes",
    "tail_window",
    "utf8_len",
]

Retain = Literal["head", "tail"]

_KiB = 1024
_MiB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class OutputPolicy:
    """How much of a tool's output is kept, declared on the tool definition.

    ``max_bytes`` / ``max_lines`` govern the text block only. Images and details are
    never windowed; they have their own hard bounds, and exceeding one fails the
    tool with ``OutputLimitError`` while keeping everything written before.
    """

    retain: Retain = "tail"
    max_bytes: int = 50 * _KiB
    max_lines: int = 2000
    max_images: int = 16
    max_image_bytes: int = 5 * _MiB
    max_total_image_bytes: int = 20 * _MiB
    max_details_bytes: int = 256 * _KiB

    def __post_init__(self) -> None:
        if self.retain not in ("head", "tail"):
            raise OutputPolicyError(
                f"OutputPolicy.retain must be 'head' or 'tail', got {self.retain!r}"
            )
        for name in (
            "max_bytes",
            "max_lines",
            "max_images",
            "max_image_bytes",
            "max_total_image_bytes",
            "max_details_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OutputPolicyError(
                    f"OutputPolicy.{name} must be a positive int, got {value!r}; "
                    "pass a bound of at least 1"
                )
        if self.max_images > 0 and self.max_total_image_bytes < self.max_image_bytes:
            raise OutputPolicyError(
                f"OutputPolicy.max_total_image_bytes ({self.max_total_image_bytes}) is smaller "
                f"than max_image_bytes ({self.max_image_bytes}); raise the total or lower the "
                "per-image bound"
            )


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (they cannot be UTF-8 encoded,
    stored or shown to a model)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)
    return text


class TextWindow:
    """The retained text of one sink plus exact totals, maintained incrementally.

    Writes are O(len(chunk)): chunks are counted and parked, and the window is
    materialised (joined and cut) only when read or when the parked text would
    exceed the cap, so memory stays within about twice the cap.

    After ``capture`` the text comes from a source that already bounded it (the
    execution environment): totals are the source's, and text is only cut if it
    would exceed this policy's caps anyway (e.g. a footer after a full view).
    """

    __slots__ = (
        "_capped",
        "_captured",
        "_chunks",
        "_chunks_bytes",
        "_chunks_newlines",
        "_first_line_exceeds",
        "_head_cut_by",
        "_last_line_bytes",
        "_max_bytes",
        "_max_lines",
        "_partial",
        "_retain",
        "_total_bytes",
        "_total_newlines",
        "_view",
        "_view_bytes",
        "_view_lines",
        "_view_newlines",
    )

    def __init__(self, policy: OutputPolicy) -> None:
        self._retain = policy.retain
        self._max_bytes = policy.max_bytes
        self._max_lines = policy.max_lines
        self._captured: Truncation | None = None
        self._reset("")

    def _reset(self, view: str) -> None:
        self._view = view
        self._view_bytes = utf8_len(view)
        self._view_newlines = view.count("\n")
        self._view_lines = count_lines(view)
        self._chunks: list[str] = []
        self._chunks_bytes = 0
        self._chunks_newlines = 0
        self._partial = False
        self._capped = False
        self._head_cut_by: Literal["lines", "bytes"] | None = None
        self._total_bytes = self._view_bytes
        self._total_newlines = view.count("\n")
        self._last_line_bytes = last_line_bytes(view)
        self._first_line_exceeds = False

    # -- writing -----------------------------------------------------------------

    def write(self, text: str) -> None:
        """Append ``text`` (already cleaned) to the output."""
        if not text:
            return
        size = utf8_len(text)
        newlines = text.count("\n")
        if self._captured is None:
            self._count(text, size, newlines)
            if self._retain == "head" and self._capped:
                return  # head: past the cap nothing is shown, only counted
        self._chunks.append(text)
        self._chunks_bytes += size
        self._chunks_newlines += newlines
        if self._chunks_bytes > self._max_bytes or len(self._chunks) > 4096:
            self._materialise()

    def replace(self, text: str) -> None:
        """Make ``text`` (already cleaned) the whole output so far."""
        if self._captured is not None:
            # The source's view is authoritative; it is only re-cut if it is over
            # our caps (a source configured with larger limits than the tool).
            self._chunks = [text]
            self._chunks_bytes = utf8_len(text)
            self._chunks_newlines = text.count("\n")
            self._partial = bool(self._captured.get("last_line_partial", False))
            self._view = ""
            self._view_bytes = 0
            self._view_newlines = 0
            self._view_lines = 0
            self._materialise()
            return
        self._reset("")
        self.write(text)

    def capture(self, truncation: Truncation) -> None:
        """Adopt source-owned totals (the execution environment counted the stream)."""
        self._captured = truncation
        # The source's view may begin mid-line; then its position 0 is no line start.
        self._partial = bool(truncation.get("last_line_partial", False))

    def _count(self, text: str, size: int, newlines: int) -> None:
        self._total_bytes += size
        self._total_newlines += newlines
        if newlines:
            self._last_line_bytes = utf8_len(text[text.rfind("\n") + 1 :])
        else:
            self._last_line_bytes += size

    def _materialise(self) -> None:
        if not self._chunks:
            return
        joined = self._view + "".join(self._chunks)
        joined_newlines = self._view_newlines + self._chunks_newlines
        joined_bytes = self._view_bytes + self._chunks_bytes
        self._chunks = []
        self._chunks_bytes = 0
        self._chunks_newlines = 0
        if self._retain == "tail":
            view, partial = tail_window(
                joined,
                self._max_bytes,
                self._max_lines,
                at_line_start=not self._partial,
                newlines=joined_newlines,
            )
            self._partial = partial
            # Recount only what was dropped: a flush costs what changed, not the window.
            gone = joined[: len(joined) - len(view)]
            self._view_newlines = joined_newlines - gone.count("\n")
            self._view_bytes = joined_bytes - utf8_len(gone)
        else:
            view, cut_by = head_window(joined, self._max_bytes, self._max_lines)
            if len(view) < len(joined):
                self._capped = True
                if self._head_cut_by is None:
                    self._head_cut_by = cut_by
                    # The head view only grows, so the first cut decides this for good.
                    self._first_line_exceeds = head_first_line_exceeds(view, joined)
                self._view_newlines = view.count("\n")
                self._view_bytes = utf8_len(view)
            else:
                self._view_newlines = joined_newlines
                self._view_bytes = joined_bytes
        self._view = view
        self._view_lines = self._view_newlines + (0 if not view or view.endswith("\n") else 1)

    # -- reading -----------------------------------------------------------------

    @property
    def text(self) -> str:
        """The retained text (materialises parked chunks)."""
        self._materialise()
        return self._view

    @property
    def view_bytes(self) -> int:
        """UTF-8 bytes of the retained text (materialises parked chunks)."""
        self._materialise()
        return self._view_bytes

    def truncation(self) -> Truncation:
        """The ``truncation`` object for the current state."""
        self._materialise()
        if self._captured is not None:
            result = dict(self._captured)
            result["output_lines"] = self._view_lines
            result["output_bytes"] = self._view_bytes
            return result  # type: ignore[return-value]
        truncated = self._total_bytes > self._view_bytes
        truncated_by: Literal["lines", "bytes"] | None = None
        if truncated:
            if self._retain == "head":
                truncated_by = self._head_cut_by or "bytes"
            else:
                truncated_by = tail_truncated_by(self._view, self._max_lines, self._partial)
        return {
            "truncated": truncated,
            "truncated_by": truncated_by,
            "total_lines": self._total_newlines + (1 if self._last_line_bytes else 0),
            "total_bytes": self._total_bytes,
            "output_lines": self._view_lines,
            "output_bytes": self._view_bytes,
            "last_line_partial": truncated and self._retain == "tail" and self._partial,
            "first_line_exceeds_limit": self._retain == "head" and self._first_line_exceeds,
            "max_lines": self._max_lines,
            "max_bytes": self._max_bytes,
            "last_line_bytes": self._last_line_bytes,
        }

    # -- resuming ----------------------------------------------------------------

    def seed(self, text: str, truncation: Truncation) -> None:
        """Resume from a recovered state: ``text`` is its retained view and
        ``truncation`` its totals (as produced by ``truncation()``)."""
        self._reset(text)
        self._total_bytes = int(truncation["total_bytes"])
        last = int(truncation.get("last_line_bytes", last_line_bytes(text)))
        self._last_line_bytes = last
        total_lines = int(truncation["total_lines"])
        self._total_newlines = total_lines - (1 if last else 0)
        self._first_line_exceeds = bool(truncation.get("first_line_exceeds_limit", False))
        if truncation.get("truncated"):
            if self._retain == "tail":
                self._partial = bool(truncation.get("last_line_partial", False))
            else:
                self._capped = True
                self._head_cut_by = truncation.get("truncated_by") or "bytes"
        if self._view_bytes > self._max_bytes or self._view_lines > self._max_lines:
            # Recovered under tighter caps than it was written with: cut the view
            # again, keeping the totals (they describe what was written, not shown).
            self._chunks, self._view = [self._view], ""
            self._chunks_bytes, self._chunks_newlines = self._view_bytes, self._view_newlines
            self._view_bytes = self._view_lines = self._view_newlines = 0
            self._materialise()
