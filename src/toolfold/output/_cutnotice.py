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
    if retain == "head_tail":
        return _middle_notice(t)
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


def _middle_notice(t: Truncation) -> str:
    cut, first = t.get("cut_lines", 0), t.get("cut_line", 0)
    total = t["total_lines"]
    if cut and first:
        last = first + cut - 1
        where = f"line {first:,}" if cut == 1 else f"lines {first:,}-{last:,}"
        return (
            f"[Showing the start and the end of {plural(total, 'line')}; {where} "
            f"({format_bytes(t.get('cut_bytes', 0))}) {'was' if cut == 1 else 'were'} cut "
            "in the middle]"
        )
    return (
        f"[Showing the start and the end of {format_bytes(t['total_bytes'])}; "
        f"{format_bytes(t.get('cut_bytes', 0))} in the middle was cut]"
    )


def cut_marker(truncation: Truncation, spill_path: str | None) -> str:
    """The line between the two parts of a head_tail text: what was cut (lines and
    bytes) and, when there is a spill file, where it is and the line to read on from.

    ``""`` while nothing is cut. It does not start or end with a newline; the sink puts
    it on a line of its own."""
    t = truncation
    if not t.get("truncated"):
        return ""
    cut, first = t.get("cut_lines", 0), t.get("cut_line", 0)
    size = format_bytes(t.get("cut_bytes", 0))
    if cut and first:
        last = first + cut - 1
        where = f"line {first:,}" if cut == 1 else f"lines {first:,}-{last:,}"
        what = f"{plural(cut, 'line')} ({size}) cut here: {where} of {t['total_lines']:,}"
    else:
        what = f"{size} cut here"
    if spill_path:
        what += f". Full output: {spill_path}"
        if first:
            what += f"; read on from line {first:,} (offset={first})"
    return f"[... {what} ...]"
