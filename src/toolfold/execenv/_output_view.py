"""The bounded view of a command's output as a consumer holds it: the retained text, the
exact totals, and where the full stream is. Plain data, shared by the update vocabulary
(``_updates.py``) and the errors that carry a partial view."""

from __future__ import annotations

from typing import Literal

from toolfold._record import record

__all__ = ["ShellOutputMetadata", "ShellOutputTruncation", "ShellOutputView"]


@record(frozen=True, slots=True, kw_only=True)
class ShellOutputTruncation:
    """Totals over everything the command wrote, and how the view relates to them.

    ``total_bytes`` / ``total_lines`` count the raw stream (a final line without a
    newline counts as a line). ``output_lines`` / ``output_bytes`` describe the
    retained view (UTF-8 bytes of the cleaned text). ``truncated`` is true when the
    view does not show the whole cleaned output; ``truncated_by`` says which limit cut
    it. ``last_line_partial`` (tail mode): the view starts in the middle of a line
    that alone exceeds ``max_bytes``. ``first_line_exceeds_limit`` (head mode): the
    first line alone exceeds ``max_bytes`` (the view shows its first ``max_bytes``).

    ``retain="head_tail"`` only: ``cut_at`` is where the head part of the view ends
    (characters; the rest of the view is the tail part), ``cut_line`` the first line
    (1-based) not wholly shown before the cut (0 while nothing is cut), ``cut_lines``
    how many lines are not wholly shown between the parts, ``cut_bytes`` how many raw
    bytes of the output the view does not show. ``cut_at`` is ``None`` in the other
    modes. ``output_lines`` counts the lines of both parts.
    """

    truncated: bool
    truncated_by: Literal["lines", "bytes"] | None
    total_lines: int
    total_bytes: int
    output_lines: int
    output_bytes: int
    last_line_partial: bool
    first_line_exceeds_limit: bool
    max_lines: int
    max_bytes: int
    cut_at: int | None = None
    cut_line: int = 0
    cut_lines: int = 0
    cut_bytes: int = 0


@record(frozen=True, slots=True, kw_only=True)
class ShellOutputMetadata:
    """Truncation totals plus where the full raw stream lives.

    ``spill_path`` is set from the moment the spill file exists. ``last_line_bytes``
    is the exact raw byte length of the last line (without its ``\\n``), even when
    that line is far larger than any buffer; ``None`` until there is output.
    ``spill_note`` is set when the spill file does not hold the whole output (it
    stopped at the ``max_spill`` cap or for lack of disk space, or was never
    written): a short phrase saying how much it holds and why.
    """

    truncation: ShellOutputTruncation
    spill_path: str | None = None
    last_line_bytes: int | None = None
    spill_note: str | None = None


@record(frozen=True, slots=True, kw_only=True)
class ShellOutputView:
    """The bounded view a consumer sees: cleaned text plus metadata."""

    text: str
    metadata: ShellOutputMetadata
