"""The MCP integration's pieces without a transport: tool loading, hints, status lines."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolfold.mcp import ToolSpecError, load_tools, read_hint, server_tools, status_line
from toolfold.mcp._progress import MAX_LAST_LINE
from toolfold.tools import BASH, READ


def test_load_tools_accepts_a_tool_a_list_or_a_factory() -> None:
    assert load_tools(["toolfold.tools:BASH"]) == [BASH]
    assert [t.name for t in load_tools(["toolfold.tools:builtin_tools"])] == [
        "bash",
        "read",
        "grep",
        "pytest",
        "bash_read",
        "bash_write",
        "bash_signal",
        "bash_stop",
        "bash_list",
    ]


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("toolfold.tools", "is not MODULE:ATTR"),
        ("no_such_module_xyz:T", "cannot import 'no_such_module_xyz'"),
        ("toolfold.tools:NOPE", "has no attribute 'NOPE'"),
        ("toolfold.tools:__all__", "not a toolfold Tool"),
    ],
)
def test_a_bad_tools_spec_is_one_clear_error(spec: str, fragment: str) -> None:
    with pytest.raises(ToolSpecError, match=fragment) as info:
        load_tools([spec])
    assert spec in str(info.value)


def test_duplicate_names_and_no_tools_are_refused() -> None:
    with pytest.raises(ToolSpecError, match="two tools are named 'bash'"):
        server_tools([BASH], builtin=True)
    with pytest.raises(ToolSpecError, match="no tools to serve"):
        server_tools([], builtin=False)
    assert server_tools([READ], builtin=False) == [READ]


def _state(truncated: bool, spill: str | None, **t: Any) -> dict[str, Any]:
    truncation = {"truncated": truncated, "output_lines": 10, "last_line_partial": False} | t
    return {"truncation": truncation, "spill_path": spill}


def test_read_hint_points_at_the_missing_part() -> None:
    tail = read_hint(_state(True, "/s/x.log"), retain="tail", reader="read")
    assert tail == (
        '[To see the rest, call read with path="/s/x.log" and offset=1; '
        "each read's footer names the offset to continue from.]"
    )
    head = read_hint(_state(True, "/s/x.log"), retain="head", reader="read")
    assert "offset=11" in head
    partial = read_hint(
        _state(True, "/s/x.log", last_line_partial=True), retain="head", reader="read"
    )
    assert "offset=10" in partial
    # head_tail: the middle is what is missing; it starts at the first cut line.
    both = read_hint(_state(True, "/s/x.log", cut_line=401), retain="head_tail", reader="read")
    assert "offset=401;" in both
    first = _state(True, "/s/x.log", cut_line=1, first_line_exceeds_limit=True)
    assert "offset=1;" in read_hint(first, retain="head_tail", reader="read")
    assert read_hint(_state(False, "/s/x.log"), retain="tail", reader="read") == ""
    assert read_hint(_state(True, None), retain="tail", reader="read") == ""
    assert read_hint(_state(True, "/s/x.log"), retain="tail", reader=None) == ""


@given(
    lines=st.integers(min_value=0, max_value=10**12),
    size=st.integers(min_value=0, max_value=2**40 - 1),
    text=st.text(),
)
def test_status_line_is_one_bounded_line(lines: int, size: int, text: str) -> None:
    status = status_line(lines, size, text)
    assert ("\n" not in status and "\r" not in status) or "\r" in text
    assert status.startswith(f"{lines:,} lines / ")
    assert len(status) <= len(f"{lines:,} lines / 1023.9 GB so far · last: ") + MAX_LAST_LINE + 20
