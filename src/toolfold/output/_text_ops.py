"""How the sink's text slots change as Chord ops: a slot's deltas (from the window) plus
its footer, a replaced text diffed against the old one, and the footer split back off a
recovered text."""

from __future__ import annotations

from collections.abc import Callable

from toolfold.chord import Op, track, utf16_len

from ._state import Truncation
from ._textwindow import TextDelta

__all__ = [
    "MARKER_PATH",
    "MAX_FOOTER_CHARS",
    "TAIL_PATH",
    "TEXT_PATH",
    "slot_ops",
    "split_footer",
    "string_ops",
]

MAX_FOOTER_CHARS = 4096
"""Longest footer a tool may set (it sits outside the window)."""


def split_footer(text: str, truncation: Truncation) -> str:
    """The part of a recovered text that lies outside its window (a footer).

    The state stores window + footer as one string; ``truncation.output_bytes`` is
    the window's size, so whatever follows it is the footer. Seeding it back into the
    window would count it as retained output and evict a line (tail) or cut it off
    (head). Anything that does not split cleanly is treated as having no footer.
    """
    window_bytes = truncation.get("output_bytes")
    if type(window_bytes) is not int or window_bytes < 0:
        return ""
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= window_bytes:
        return ""
    try:
        window = raw[:window_bytes].decode("utf-8")
    except UnicodeDecodeError:
        return ""
    footer = text[len(window) :]
    return footer if len(footer) <= MAX_FOOTER_CHARS else ""


TEXT_PATH = ("content", 0, "text")
"""Where the text block lives in the state (under head_tail: the head part)."""
MARKER_PATH = ("content", 1, "text")
TAIL_PATH = ("content", 2, "text")
"""Under ``retain="head_tail"``: the cut marker and the tail part (plus any footer)."""


def slot_ops(
    path: tuple[str, int, str],
    deltas: list[TextDelta],
    text: Callable[[], str],
    suffix: str,
    old_suffix: str,
) -> list[Op]:
    """The ops of one text slot holding ``text()`` + ``suffix`` (a footer or notice) given
    what the window reported since the last flush (``text`` is only read, joining the
    window, when the whole slot has to be set)."""
    if (
        any(kind == "s" for kind, _ in deltas)
        or not suffix.startswith(old_suffix)
        or (old_suffix and any(kind == "a" for kind, _ in deltas))
    ):
        # An append behind a footer, or a changed footer: set the whole text.
        return [["s", list(path), text() + suffix]]
    ops: list[Op] = [[kind, list(path), value] for kind, value in deltas]
    if len(suffix) > len(old_suffix):
        ops.append(["a", list(path), suffix[len(old_suffix) :]])
    return ops


def string_ops(old: str, new: str, path: tuple[str, int, str] = TEXT_PATH) -> list[Op]:
    """``t`` + ``a`` (or ``a``, or ``s``) turning ``old`` into ``new`` at the text path,
    found by Chord's own string diff over the whole of ``old`` (used for ``replace``,
    which does not say what it kept)."""
    tracker = track({"text": old}, max_overlap_scan=max(utf16_len(old), 1))
    tracker.flush()
    tracker.state["text"] = new
    return [[op[0], list(path), *op[2:]] for op in tracker.flush()]
