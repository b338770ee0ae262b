"""The window rule: which part of a text a bounded head or tail view keeps.

One implementation for both places that window text: the exec env's
``OutputCapture`` (shell output, at the source) and the output sink's
``TextWindow`` (what a tool writes). ``toolfold.output`` imports it from here, so
a command's output and a tool's own text are cut, counted and flagged alike
(``tests/output/test_window_rule_props.py`` checks both against each other).

Definitions (``T`` is the text; ``max_bytes`` counts UTF-8 bytes):

- lines: ``T.count("\\n")`` plus one for a final line without a newline;
- **tail** view: the longest suffix of ``T`` that starts at a line start and fits
  both caps; if no line start fits (the last line alone is over ``max_bytes``),
  the last ``max_bytes`` bytes on a character boundary (``last_line_partial``).
  It is cut by ``"bytes"`` when it is partial or holds fewer than ``max_lines``
  lines, else by ``"lines"``;
- **head** view: the longest prefix of ``T`` within ``max_bytes`` (on a character
  boundary) and ending at the ``max_lines``-th newline at the latest.
  ``first_line_exceeds_limit``: the head view is cut and holds no complete line
  (the first line, with its newline, is over ``max_bytes``).
- **head_tail** view (``head_tail_window``): ``T`` itself when it fits both caps;
  otherwise the head view of ``T`` under the head's share of the caps followed by the
  tail view of ``T`` under the rest (``head_tail_caps``). The two parts never meet
  when ``T`` does not fit (together they are within both caps, ``T`` is not), so at
  least one character lies between them: that is what was cut.
"""

from __future__ import annotations

from typing import Literal

from ._updates import utf8_len

__all__ = [
    "DEFAULT_HEAD_SHARE",
    "check_head_share",
    "count_lines",
    "head_first_line_exceeds",
    "head_tail_caps",
    "head_tail_window",
    "head_window",
    "last_line_bytes",
    "tail_truncated_by",
    "tail_window",
    "utf8_len",
]


def count_lines(text: str) -> int:
    """Lines in ``text``: newlines, plus one for a final line without a newline."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def last_line_bytes(text: str) -> int:
    """UTF-8 bytes after the last newline of ``text``."""
    return utf8_len(text[text.rfind("\n") + 1 :])


def _after_nth_newline(text: str, n: int, total: int | None = None) -> int:
    """Index just after the ``n``-th newline (1-based) of ``text``; it must exist.
    ``total`` is ``text.count("\\n")`` when the caller already knows it."""
    if total is None:
        total = text.count("\n")
    if n <= total - n + 1:
        pos = -1
        for _ in range(n):
            pos = text.find("\n", pos + 1)
        return pos + 1
    # Nearer the end: walk back (total - n + 1) newlines instead.
    pos = len(text)
    for _ in range(total - n + 1):
        pos = text.rfind("\n", 0, pos)
    return pos + 1


def _tail_bytes(text: str, max_bytes: int) -> str:
    """The last ``max_bytes`` bytes of ``text``, starting on a character boundary."""
    if text.isascii():
        return text[-max_bytes:]
    raw = text.encode("utf-8")
    start = max(0, len(raw) - max_bytes)
    # Skip continuation bytes so the view never starts inside a character.
    while start < len(raw) and (raw[start] & 0xC0) == 0x80:
        start += 1
    return raw[start:].decode("utf-8")


def tail_window(
    text: str,
    max_bytes: int,
    max_lines: int,
    *,
    at_line_start: bool = True,
    newlines: int | None = None,
) -> tuple[str, bool]:
    """The tail view of ``text`` and whether it starts mid-line.

    ``at_line_start=False`` says ``text`` itself begins mid-line (it continues a
    partial view), so its position 0 is not a line start. Applying this to
    ``previous_view + new_text`` gives the same view as applying it to everything
    written, which is what lets the sink window incrementally. ``newlines`` is
    ``text.count("\\n")`` when the caller keeps that count (so a flush does not
    rescan the whole window).
    """
    if newlines is None:
        newlines = text.count("\n")
    lines = newlines + (0 if not text or text.endswith("\n") else 1)
    start = 0
    line_start_ok = at_line_start
    if lines > max_lines:
        start = _after_nth_newline(text, lines - max_lines, newlines)
        line_start_ok = True
    segment = text[start:] if start else text
    size = utf8_len(segment)
    if line_start_ok and size <= max_bytes:
        return segment, False
    # Find the first line start at or after the bytes that must go (position 0
    # counts only when it is a real line start, handled above).
    excess = max(size - max_bytes, 0)
    if segment.isascii():
        nl = segment.find("\n", max(excess - 1, 0))
        if nl != -1 and nl + 1 < len(segment):
            return segment[nl + 1 :], False
        return segment[-max_bytes:], True
    raw = segment.encode("utf-8")
    nl = raw.find(b"\n", max(excess - 1, 0))
    if nl != -1 and nl + 1 < len(raw):
        return raw[nl + 1 :].decode("utf-8"), False
    return _tail_bytes(segment, max_bytes), True


def head_window(text: str, max_bytes: int, max_lines: int) -> tuple[str, Literal["lines", "bytes"]]:
    """The head view of ``text`` and which cap ends it (meaningful only if it is shorter)."""
    line_end = len(text)
    if text.count("\n") >= max_lines:
        line_end = _after_nth_newline(text, max_lines)
    if text.isascii():
        byte_end = min(len(text), max_bytes)
        if line_end <= byte_end:
            return text[:line_end], "lines"
        return text[:byte_end], "bytes"
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text[:line_end], "lines"
    # A cut inside a character drops that character ("ignore" only drops the
    # incomplete trailing sequence: the rest is valid UTF-8).
    by_bytes = raw[:max_bytes].decode("utf-8", "ignore")
    if line_end <= len(by_bytes):
        return text[:line_end], "lines"
    return by_bytes, "bytes"


def tail_truncated_by(view_lines: int, max_lines: int, partial: bool) -> Literal["lines", "bytes"]:
    """Which cap cut a (truncated) tail view of ``view_lines`` lines."""
    return "bytes" if partial or view_lines < max_lines else "lines"


def head_first_line_exceeds(view: str, text: str) -> bool:
    """Whether the head ``view`` of ``text`` is cut inside the first line (it holds no
    complete line: the first line with its newline is over the byte cap)."""
    return len(view) < len(text) and "\n" not in view


DEFAULT_HEAD_SHARE = 0.2
"""The head's share of the caps in ``retain="head_tail"`` (see docs/execenv.md)."""


def _share(cap: int, head_share: float) -> int:
    # At least one for each part: a head_tail cap is at least 2 (checked by the limits).
    return min(cap - 1, max(1, int(cap * head_share)))


def head_tail_caps(max_bytes: int, max_lines: int, head_share: float) -> tuple[int, int, int, int]:
    """``(head_bytes, head_lines, tail_bytes, tail_lines)``: the caps split by the share.

    Each part gets at least 1 of each cap and the two add up to the caps, so the view
    is never larger than a head or tail view under the same limits."""
    head_bytes, head_lines = _share(max_bytes, head_share), _share(max_lines, head_share)
    return head_bytes, head_lines, max_bytes - head_bytes, max_lines - head_lines


def head_tail_window(
    text: str, max_bytes: int, max_lines: int, head_share: float
) -> tuple[str, str, bool] | None:
    """``None`` when ``text`` fits both caps (the view is ``text``), else ``(head, tail,
    tail_partial)``: the head view under the head caps, the tail view under the tail caps.

    The reference the capture and the output sink are tested against."""
    if utf8_len(text) <= max_bytes and count_lines(text) <= max_lines:
        return None
    head_bytes, head_lines, tail_bytes, tail_lines = head_tail_caps(
        max_bytes, max_lines, head_share
    )
    head, _ = head_window(text, head_bytes, head_lines)
    tail, partial = tail_window(text, tail_bytes, tail_lines)
    return head, tail, partial


def check_head_share(head_share: object) -> str | None:
    """Why ``head_share`` is not a valid share (``None`` when it is)."""
    if isinstance(head_share, bool) or not isinstance(head_share, int | float):
        return f"head_share must be a number between 0 and 1, got {head_share!r}"
    if not 0 < head_share < 1:
        return (
            f"head_share must be between 0 and 1 (exclusive), got {head_share!r}; "
            f"the default is {DEFAULT_HEAD_SHARE}"
        )
    return None
