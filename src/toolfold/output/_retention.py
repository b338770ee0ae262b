"""Retention: the ``OutputPolicy`` a tool declares and the head/tail text window.

The window (``TextWindow``, in ``_textwindow.py``) reports what it dropped and
appended, so a rolling tail reaches replicas as "drop a prefix, append a suffix"
(Chord ``t`` + ``a``), never as a whole-window set. Totals are exact over
everything written.

The window rule itself (what a head or tail view keeps, which cap cut it, when the
first line exceeds the limit) is the exec env's (``toolfold.execenv._window``): shell
output and a tool's own text are cut by one implementation.
"""

from __future__ import annotations

from typing import Literal

from toolfold._record import record
from toolfold.execenv import (
    DEFAULT_HEAD_SHARE,
    check_head_share,
    count_lines,
    head_window,
    last_line_bytes,
    tail_window,
    utf8_len,
)

from ._errors import OutputPolicyError
from ._textwindow import TextWindow, clean_text

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

Retain = Literal["head", "tail", "head_tail"]

_KiB = 1024
_MiB = 1024 * 1024


@record(frozen=True, slots=True)
class OutputPolicy:
    """How much of a tool's output is kept, declared on the tool definition.

    ``max_bytes`` / ``max_lines`` govern the text block only. Images and details are
    never windowed; they have their own hard bounds, and exceeding one fails the
    tool with ``OutputLimitError`` while keeping everything written before.
    """

    retain: Retain = "tail"
    max_bytes: int = 50 * _KiB
    max_lines: int = 2000
    head_share: float = DEFAULT_HEAD_SHARE
    """``retain="head_tail"`` only: the share of each cap the beginning keeps (the rest
    is the rolling end). Ignored by ``"head"`` and ``"tail"``."""
    max_images: int = 16
    max_image_bytes: int = 5 * _MiB
    max_total_image_bytes: int = 20 * _MiB
    max_details_bytes: int = 256 * _KiB
    cut_notice: bool = True
    """When the text settles cut and the tool set no ``footer()``, a short standard note
    outside the window says so (``[Showing the last 3 of 1,000 lines; 997 earlier lines
    were cut]``). ``False`` leaves a cut text as it is."""

    def __post_init__(self) -> None:
        if self.retain not in ("head", "tail", "head_tail"):
            raise OutputPolicyError(
                f"OutputPolicy.retain must be 'head', 'tail' or 'head_tail', got {self.retain!r}"
            )
        problem = check_head_share(self.head_share)
        if problem:
            raise OutputPolicyError(f"OutputPolicy.{problem}")
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
        if self.retain == "head_tail" and min(self.max_bytes, self.max_lines) < 2:
            raise OutputPolicyError(
                "OutputPolicy with retain='head_tail' needs max_bytes and max_lines of at "
                f"least 2 (one for each part), got {self.max_bytes} and {self.max_lines}"
            )
        if not isinstance(self.cut_notice, bool):
            raise OutputPolicyError(
                f"OutputPolicy.cut_notice must be a bool, got {self.cut_notice!r}"
            )
        # max_images >= 1 here, so every policy may hold an image and the total must fit one.
        if self.max_total_image_bytes < self.max_image_bytes:
            raise OutputPolicyError(
                f"OutputPolicy.max_total_image_bytes ({self.max_total_image_bytes}) is smaller "
                f"than max_image_bytes ({self.max_image_bytes}); raise the total or lower the "
                "per-image bound"
            )
