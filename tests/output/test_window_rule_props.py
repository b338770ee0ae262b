"""One window rule: the exec env's capture and the sink's text window cut any text alike.

Shell output is windowed at the source (``execenv.OutputCapture``), a tool's own text by
the sink (``output.TextWindow``); both call the rule in ``execenv._window``. For any
cleaned text (no control characters, no ``\\r``: what capture's cleanup leaves), any
chunking and any caps, both give the same view and the same truncation record.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.execenv import ShellOutputLimits, capture_for
from toolfold.output import OutputPolicy
from toolfold.output._headtail import HeadTailWindow
from toolfold.output._retention import TextWindow

RECORD = (
    "truncated",
    "truncated_by",
    "total_lines",
    "total_bytes",
    "output_lines",
    "output_bytes",
    "last_line_partial",
    "first_line_exceeds_limit",
    "max_lines",
    "max_bytes",
)
CUT = ("cut_line", "cut_lines", "cut_bytes")

# Cleaned-stream characters of every UTF-8 length, plus tabs, spaces and newlines.
TEXT = st.text(alphabet=st.sampled_from("ab \té漢😀\n\n"), max_size=400)


def _cuts(draw: Any, n: int) -> list[int]:
    points = draw(st.lists(st.integers(0, n), max_size=8))
    return sorted({0, n, *points})


@st.composite
def _cases(draw: Any) -> tuple[str, list[int], list[int], int, int, str]:
    text = draw(TEXT)
    if draw(st.booleans()):
        text = text * draw(st.integers(1, 40))  # long inputs: capture's skip path
    raw = text.encode()
    return (
        text,
        _cuts(draw, len(text)),
        _cuts(draw, len(raw)),
        draw(st.integers(2, 80)),
        draw(st.integers(2, 10)),
        draw(st.sampled_from(["head", "tail", "head_tail"])),
        draw(st.sampled_from([0.2, 0.5, 0.05, 0.9])),
    )


def _windows(
    text: str,
    str_cuts: list[int],
    byte_cuts: list[int],
    max_bytes: int,
    max_lines: int,
    retain: Any,
    share: float = 0.2,
) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    capture = capture_for(
        ShellOutputLimits(max_bytes=max_bytes, max_lines=max_lines, retain=retain, head_share=share)
    )
    raw = text.encode()
    for a, b in itertools.pairwise(byte_cuts):
        capture.feed(raw[a:b])
    capture.close()
    snap = capture.snapshot()
    keys = RECORD + CUT if retain == "head_tail" else RECORD
    captured = {k: getattr(snap.truncation, k) for k in keys}
    policy = OutputPolicy(max_bytes=max_bytes, max_lines=max_lines, retain=retain, head_share=share)
    window = HeadTailWindow(policy) if retain == "head_tail" else TextWindow(policy)
    for a, b in itertools.pairwise(str_cuts):
        window.write(text[a:b])
    record = window.truncation()
    windowed = {k: record[k] for k in keys}  # type: ignore[literal-required]
    if retain == "head_tail" and snap.truncation.truncated:
        assert snap.truncation.cut_at == len(window.head)
    return (snap.text, captured), (window.text, windowed)


@settings(max_examples=600)
@given(_cases())
def test_capture_and_sink_window_any_text_alike(case: Any) -> None:
    captured, windowed = _windows(*case)
    assert windowed == captured


def test_a_first_line_of_exactly_the_cap_then_a_newline_exceeds_it_in_both() -> None:
    # The case the two implementations used to disagree on: the line fits without its
    # newline, so the head view holds no complete line.
    (text, record), (wtext, wrecord) = _windows("abcd\nef\n", [0, 8], [0, 8], 4, 5, "head")
    assert text == wtext == "abcd"
    assert record["first_line_exceeds_limit"] is wrecord["first_line_exceeds_limit"] is True
    assert record == wrecord
