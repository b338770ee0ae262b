"""The cut notice and the head_tail marker word for word at their edges: one line or
many, thousands separators, byte units, head / tail / head_tail wording, the line a
reader goes on from. These are the only words a model gets about what it did not see,
so a wrong number or a dropped clause misleads it silently."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold.output import OutputPolicy, ToolOutput
from toolfold.output._cutnotice import cut_marker, cut_notice
from toolfold.output._state import Truncation


def _t(**fields: Any) -> Truncation:
    base: dict[str, Any] = {
        "truncated": True,
        "truncated_by": "lines",
        "total_lines": 0,
        "total_bytes": 0,
        "output_lines": 0,
        "output_bytes": 0,
        "last_line_partial": False,
        "first_line_exceeds_limit": False,
        "max_lines": 0,
        "max_bytes": 0,
        "last_line_bytes": 0,
    }
    base.update(fields)
    return base  # type: ignore[return-value]


@pytest.mark.parametrize("retain", ["head", "tail", "head_tail"])
def test_nothing_cut_says_nothing(retain: str) -> None:
    t = _t(
        truncated=False,
        total_lines=9,
        output_lines=1,
        total_bytes=90,
        output_bytes=10,
        cut_line=2,
        cut_lines=8,
        cut_bytes=80,
    )
    assert cut_notice(t, retain) == ""
    assert cut_marker(t, "/spill") == ""


@pytest.mark.parametrize(
    ("retain", "total", "shown", "expected"),
    [
        ("tail", 2000, 1999, "[Showing the last 1,999 of 2,000 lines; 1 earlier line was cut]"),
        ("tail", 2, 1, "[Showing the last 1 of 2 lines; 1 earlier line was cut]"),
        ("head", 1234, 2, "[Showing the first 2 of 1,234 lines; 1,232 later lines were cut]"),
        ("head", 3, 1, "[Showing the first 1 of 3 lines; 2 later lines were cut]"),
    ],
)
def test_lines_cut(retain: str, total: int, shown: int, expected: str) -> None:
    t = _t(total_lines=total, output_lines=shown, total_bytes=9999, output_bytes=99)
    assert cut_notice(t, retain) == expected


@pytest.mark.parametrize("flag", ["last_line_partial", "first_line_exceeds_limit"])
def test_a_window_holding_part_of_a_line_gives_sizes_not_lines(flag: str) -> None:
    # Either flag alone says the window holds part of a line: lines would be wrong.
    t = _t(total_lines=5, output_lines=1, total_bytes=3 * 1024 * 1024, output_bytes=1024)
    t[flag] = True  # type: ignore[literal-required]
    assert cut_notice(t, "tail") == (
        "[Showing the last 1.0 KiB of 3.0 MiB; the earlier 3.0 MiB was cut]"
    )
    assert cut_notice(t, "head") == (
        "[Showing the first 1.0 KiB of 3.0 MiB; the later 3.0 MiB was cut]"
    )


def test_cut_by_bytes_on_a_line_boundary_gives_sizes() -> None:
    # As many lines shown as written (the bytes cap cut, not the lines cap): "0 lines
    # were cut" would be false, so the sizes are given.
    t = _t(truncated_by="bytes", total_lines=4, output_lines=4, total_bytes=700, output_bytes=500)
    assert cut_notice(t, "head") == "[Showing the first 500 B of 700 B; the later 200 B was cut]"


def test_the_cut_size_is_never_negative() -> None:
    t = _t(total_lines=1, output_lines=1, total_bytes=10, output_bytes=12)
    assert cut_notice(t, "tail") == "[Showing the last 12 B of 10 B; the earlier 0 B was cut]"


@pytest.mark.parametrize(
    ("cut", "first", "expected"),
    [
        (
            1,
            5,
            "[Showing the start and the end of 1,500 lines; line 5 (640 B) was cut in the middle]",
        ),
        (
            2,
            5,
            "[Showing the start and the end of 1,500 lines; lines 5-6 (640 B) were cut in the middle]",
        ),
        (
            1000,
            1001,
            "[Showing the start and the end of 1,500 lines; lines 1,001-2,000 (640 B) were cut "
            "in the middle]",
        ),
    ],
)
def test_head_tail_notice_names_the_lines_cut(cut: int, first: int, expected: str) -> None:
    t = _t(
        total_lines=1500,
        output_lines=10,
        total_bytes=2000,
        output_bytes=1360,
        cut_lines=cut,
        cut_line=first,
        cut_bytes=640,
    )
    assert cut_notice(t, "head_tail") == expected


@pytest.mark.parametrize(
    "fields",
    [
        {},  # an older record without the head_tail fields
        {"cut_line": 5},
        {"cut_lines": 3},
        {"cut_line": 0, "cut_lines": 3, "cut_bytes": 0},
        {"cut_line": 5, "cut_lines": 0, "cut_bytes": 0},
    ],
)
def test_head_tail_without_whole_lines_cut_gives_sizes(fields: dict[str, int]) -> None:
    t = _t(total_lines=1, output_lines=1, total_bytes=2048, output_bytes=1000)
    t.update(fields)  # type: ignore[typeddict-item]
    assert cut_notice(t, "head_tail") == (
        "[Showing the start and the end of 2.0 KiB; 0 B in the middle was cut]"
    )
    assert cut_marker(t, None) == "[... 0 B cut here ...]"
    t["cut_bytes"] = 1048
    assert cut_notice(t, "head_tail") == (
        "[Showing the start and the end of 2.0 KiB; 1.0 KiB in the middle was cut]"
    )


@pytest.mark.parametrize(
    ("cut", "first", "spill", "expected"),
    [
        (1, 7, None, "[... 1 line (64 B) cut here: line 7 of 1,500 ...]"),
        (2, 7, None, "[... 2 lines (64 B) cut here: lines 7-8 of 1,500 ...]"),
        (
            1000,
            1001,
            "/tmp/spill.log",
            "[... 1,000 lines (64 B) cut here: lines 1,001-2,000 of 1,500. Full output: "
            "/tmp/spill.log; read on from line 1,001 (offset=1001) ...]",
        ),
        (0, 0, "/s", "[... 64 B cut here. Full output: /s ...]"),
        (0, 9, "/s", "[... 64 B cut here. Full output: /s; read on from line 9 (offset=9) ...]"),
        (3, 0, None, "[... 64 B cut here ...]"),
    ],
)
def test_cut_marker(cut: int, first: int, spill: str | None, expected: str) -> None:
    t = _t(
        total_lines=1500,
        output_lines=10,
        total_bytes=5000,
        output_bytes=640,
        cut_lines=cut,
        cut_line=first,
        cut_bytes=64,
    )
    assert cut_marker(t, spill) == expected


def test_cut_marker_without_the_head_tail_fields() -> None:
    t = _t(total_lines=4, output_lines=2, total_bytes=40, output_bytes=20)
    assert cut_marker(t, "/s") == "[... 0 B cut here. Full output: /s ...]"
    t["cut_line"] = 3
    assert (
        cut_marker(t, "/s")
        == "[... 0 B cut here. Full output: /s; read on from line 3 (offset=3) ...]"
    )


def test_a_head_tail_text_ends_with_the_notice_that_names_the_cut_lines() -> None:
    out = ToolOutput(OutputPolicy(retain="head_tail", max_lines=4, max_bytes=10_000))
    out.write("".join(f"{i}\n" for i in range(1, 11)))
    state = out.settle()
    assert [c["text"] for c in state["content"]] == [  # type: ignore[typeddict-item]
        "1\n",
        "[... 6 lines (12 B) cut here: lines 2-7 of 10 ...]\n",
        "8\n9\n10\n[Showing the start and the end of 10 lines; lines 2-7 (12 B) were cut in "
        "the middle]",
    ]


def test_head_tail_notice_without_a_cut_size_says_zero_bytes() -> None:
    t = _t(total_lines=9, output_lines=4, total_bytes=90, output_bytes=40, cut_line=3, cut_lines=5)
    assert cut_notice(t, "head_tail") == (
        "[Showing the start and the end of 9 lines; lines 3-7 (0 B) were cut in the middle]"
    )
    assert cut_marker(t, None) == "[... 5 lines (0 B) cut here: lines 3-7 of 9 ...]"
