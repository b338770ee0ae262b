"""What a model reads when a tool's text was cut: a standard notice outside the window,
unless the tool said it itself (``footer()``) or turned the notice off."""

from __future__ import annotations

import pytest

from toolfold.output import OutputPolicy, OutputPolicyError, ToolOutput


def _settled(policy: OutputPolicy, text: str, footer: str | None = None) -> str:
    out = ToolOutput(policy)
    out.write(text)
    if footer is not None:
        out.footer(footer)
    state = out.settle()
    result = state["content"][0]["text"]
    assert isinstance(result, str)
    return result


_LINES = "".join(f"{i}\n" for i in range(1, 1001))


def test_tail_cut_by_lines_says_how_many_earlier_lines_were_cut() -> None:
    text = _settled(OutputPolicy(retain="tail", max_lines=3), _LINES)
    assert text == "998\n999\n1000\n[Showing the last 3 of 1,000 lines; 997 earlier lines were cut]"


def test_head_cut_by_lines_says_how_many_later_lines_were_cut() -> None:
    text = _settled(OutputPolicy(retain="head", max_lines=999), _LINES)
    assert text.endswith("999\n[Showing the first 999 of 1,000 lines; 1 later line was cut]")


def test_cut_by_bytes_inside_one_line_gives_sizes() -> None:
    text = _settled(OutputPolicy(retain="tail", max_bytes=2048), "x" * 300_000)
    assert (
        text == "x" * 2048 + "\n[Showing the last 2.0 KiB of 293 KiB; the earlier 291 KiB was cut]"
    )


def test_the_notice_sits_outside_the_window_and_survives_an_error_notice() -> None:
    out = ToolOutput(OutputPolicy(retain="tail", max_lines=2))
    out.write("a\nb\nc\n")
    state = out.settle("Error: boom")
    assert state["content"][0]["text"] == (
        "b\nc\n[Showing the last 2 of 3 lines; 1 earlier line was cut]\nError: boom"
    )
    assert state["truncation"]["output_lines"] == 2  # the notice is not counted


def test_a_tool_footer_replaces_the_notice() -> None:
    text = _settled(OutputPolicy(max_lines=3), _LINES, footer="[use offset=4]")
    assert text == "998\n999\n1000\n[use offset=4]"


def test_the_notice_can_be_turned_off() -> None:
    assert _settled(OutputPolicy(max_lines=3, cut_notice=False), _LINES) == "998\n999\n1000\n"
    with pytest.raises(OutputPolicyError, match="cut_notice must be a bool, got 'no'"):
        OutputPolicy(cut_notice="no")  # type: ignore[arg-type]


def test_an_uncut_text_gets_no_notice() -> None:
    assert _settled(OutputPolicy(max_lines=3), "1\n2\n3\n") == "1\n2\n3\n"


def test_replicas_fold_the_notice() -> None:
    from toolfold.chord import apply

    out = ToolOutput(OutputPolicy(max_lines=2))
    stream = out.open_stream()
    replica = apply(None, stream.take())
    out.write("a\nb\nc")
    replica = apply(replica, stream.take())
    state = out.settle()
    replica = apply(replica, stream.take())
    assert replica == state
    assert state["content"][0]["text"] == (
        "b\nc\n[Showing the last 2 of 3 lines; 1 earlier line was cut]"
    )
