"""The standard notice a cut text gets when its tool says nothing about the cut itself."""

from __future__ import annotations

from toolfold._units import format_bytes, plural

from ._state import Truncation


def cut_notice(truncation: Truncation, retain: str) -> str:
    """``[Showing the last 3 of 1,000 lines; 997 earlier lines were cut]``, or ``""``.

    A model reading a windowed text believes it saw everything unless the text says
    otherwise; this is what it says. Lines are counted when whole lines were dropped;
    when the window holds part of one line (a line longer than the byte bound) the
    sizes are given instead.
    """
    t = truncation
    if not t.get("truncated"):
        return ""
    edge, side = ("last", "earlier") if retain == "tail" else ("first", "later")
    total, shown = t["total_lines"], t["output_lines"]
    partial = t.get("last_line_partial") or t.get("first_line_exceeds_limit")
    if total > shown and not partial:
        cut = total - shown
        verb = "was" if cut == 1 else "were"
        return (
            f"[Showing the {edge} {shown:,} of {plural(total, 'line')}; "
            f"{plural(cut, side + ' line')} {verb} cut]"
        )
    cut_bytes = max(t["total_bytes"] - t["output_bytes"], 0)
    return (
        f"[Showing the {edge} {format_bytes(t['output_bytes'])} of "
        f"{format_bytes(t['total_bytes'])}; the {side} {format_bytes(cut_bytes)} was cut]"
    )
