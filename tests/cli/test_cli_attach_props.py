"""``toolfold attach``'s line follower, for any output, window size and moments of
reading: every line of the output is either printed once, in order, or counted in a
"went past the window" note — never both, never twice — and the last window is
always printed whole."""

from __future__ import annotations

import contextlib
import io
import re

from hypothesis import given
from hypothesis import strategies as st

from toolfold.cli._attach import LineFollower


@st.composite
def reads(draw: st.DrawFn) -> tuple[list[str], int, list[int], str]:
    n = draw(st.integers(0, 60))
    lines = [f"{i}:{draw(st.text(alphabet='ab ', max_size=3))}" for i in range(n)]
    window = draw(st.integers(1, 12))
    polls = sorted(draw(st.lists(st.integers(0, n), max_size=8)))
    partial = draw(st.sampled_from(["", "tail-without-newline"]))
    return lines, window, polls, partial


def window_of(
    lines: list[str], k: int, window: int, partial: str = ""
) -> tuple[str, dict[str, object]]:
    shown = lines[max(0, k - window) : k]
    text = "".join(line + "\n" for line in shown) + partial
    total = k + (1 if partial else 0)
    return text, {"total_lines": total, "truncated": k > len(shown)}


@given(reads())
def test_each_line_is_printed_once_or_counted_as_skipped(
    case: tuple[list[str], int, list[int], str],
) -> None:
    lines, window, polls, partial = case
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        follower = LineFollower("tail")
        for k in polls:
            text, truncation = window_of(lines, k, window)
            follower.update([text], truncation, "/spill.log")
        text, truncation = window_of(lines, len(lines), window, partial)
        follower.update([text], truncation, "/spill.log", final=True)
    printed = out.getvalue().splitlines()
    skipped = sum(int(n) for n in re.findall(r"\[\.\.\. (\d+) lines? went past", err.getvalue()))
    expected = lines + ([partial] if partial else [])
    assert len(printed) + skipped == len(expected)
    # In order, no repeats: the printed lines are the output minus the skipped ones.
    indices = [expected.index(line) for line in printed]
    assert indices == sorted(set(indices))
    # The last window (and a last line without a newline) is printed whole.
    last = expected[-(window + (1 if partial else 0)) :] if expected else []
    assert printed[len(printed) - len(last) :] == last
