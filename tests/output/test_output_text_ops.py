"""How a sink's text slot becomes ops, and how a recovered text is split back into its
window and its footer: a wrong split counts a footer as output (or drops it), a wrong op
loses a footer in every replica while the sink's own state looks right."""

from __future__ import annotations

from typing import Any

import pytest

from toolfold.chord import apply
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.output._state import Truncation
from toolfold.output._text_ops import (
    MAX_FOOTER_CHARS,
    TEXT_PATH,
    slot_ops,
    split_footer,
    string_ops,
)


def _window(output_bytes: Any) -> Truncation:
    return {"output_bytes": output_bytes}  # type: ignore[typeddict-item]


def test_the_footer_is_what_follows_the_window_bytes() -> None:
    assert split_footer("ok ✓\n[see /spill]", _window(len("ok ✓\n".encode()))) == "[see /spill]"
    assert split_footer("ok ✓\n", _window(len("ok ✓\n".encode()))) == ""


def test_an_empty_window_with_a_footer_is_all_footer() -> None:
    # A tool that wrote nothing and said why: the text is its footer, not retained output.
    assert split_footer("[nothing matched]", _window(0)) == "[nothing matched]"


@pytest.mark.parametrize("output_bytes", [None, "5", 2.0, -1, True])
def test_totals_that_are_not_a_byte_count_mean_no_footer(output_bytes: Any) -> None:
    assert split_footer("abc[f]", _window(output_bytes)) == ""


def test_a_window_end_inside_a_character_means_no_footer() -> None:
    assert split_footer("✓[f]", _window(1)) == ""


def test_a_lone_surrogate_in_the_footer_is_kept() -> None:
    assert split_footer("ab\ud800", _window(2)) == "\ud800"


def test_a_footer_longer_than_a_tool_may_set_is_not_a_footer() -> None:
    footer = "f" * MAX_FOOTER_CHARS
    assert split_footer("ab" + footer, _window(2)) == footer
    assert split_footer("ab" + footer + "f", _window(2)) == ""


def test_string_ops_find_the_append_and_the_slide() -> None:
    path = list(TEXT_PATH)
    assert string_ops("hello", "hello world") == [["a", path, " world"]]
    assert string_ops("abc\ndef\n", "def\nghi\n") == [["t", path, 4], ["a", path, "ghi\n"]]
    assert string_ops("", "x") == [["a", path, "x"]]


def test_string_ops_find_a_slide_over_the_whole_old_text() -> None:
    # The overlap is longer than a tracker scans by default: a replace must still send
    # only what changed, not the whole window again.
    old, new = "a" * 10 + "b" * 70_000, "b" * 70_000 + "c"
    assert string_ops(old, new) == [["t", list(TEXT_PATH), 10], ["a", list(TEXT_PATH), "c"]]


@pytest.mark.parametrize("retain", ["tail", "head", "head_tail"])
def test_a_seeded_footer_reaches_every_replica(retain: str) -> None:
    policy = OutputPolicy(retain=retain, max_lines=4)  # type: ignore[arg-type]
    first = ToolOutput(policy)
    for i in range(1, 11):
        first.write(f"line {i} ✓\n")
    first.footer("[Full output: /spill/x.log]")
    seeded = ToolOutput(policy, seed=first.snapshot())
    stream = seeded.open_stream()
    replica = apply(None, stream.take())
    seeded.write("line 11 ✓\n")
    replica = apply(replica, stream.take())
    state = seeded.settle()
    replica = apply(replica, stream.take())
    assert replica == state
    assert state["content"][-1]["text"].endswith("[Full output: /spill/x.log]")  # type: ignore[typeddict-item]


def test_a_slot_set_anew_keeps_its_footer() -> None:
    # The window was set anew (a replace): the whole slot is set, footer included; an
    # `s` of the window alone would drop the footer from every replica.
    path = list(TEXT_PATH)
    ops = slot_ops(TEXT_PATH, [("s", "new\n")], lambda: "new\n", "[F]", "[F]")
    assert ops == [["s", path, "new\n[F]"]]
    assert slot_ops(TEXT_PATH, [("t", 2), ("a", "x")], lambda: "", "", "") == [
        ["t", path, 2],
        ["a", path, "x"],
    ]
    assert slot_ops(TEXT_PATH, [("a", "x")], lambda: "abx", "[F]", "") == [
        ["a", path, "x"],
        ["a", path, "[F]"],
    ]


def test_details_of_exactly_the_cap_fit_and_one_byte_more_rolls_back() -> None:
    out = ToolOutput(OutputPolicy(max_details_bytes=20))
    stream = out.open_stream()
    replica = apply(None, stream.take())
    out.details["k"] = "x" * 12  # {"k":"xxxxxxxxxxxx"}: 20 bytes
    replica = apply(replica, stream.take())
    assert out.failure is None
    out.details["k"] = "x" * 13
    replica = apply(replica, stream.take())
    assert replica["details"] == {"k": "x" * 12}
    assert str(out.failure) == (
        "tool details serialise to 21 bytes, over max_details_bytes=20; details were rolled "
        "back to the last state that fitted (20 bytes). Keep details small (counts, a bounded "
        "list) and put bulk in the text, or raise OutputPolicy.max_details_bytes"
    )


def test_a_stream_is_dirty_after_a_write_or_a_details_change_only() -> None:
    out = ToolOutput()
    stream = out.open_stream()
    stream.take()
    assert not stream.dirty
    out.write("a\n")
    assert stream.dirty  # the text alone
    stream.take()
    assert not stream.dirty
    out.details["n"] = 1
    assert stream.dirty  # the details alone
    stream.take()
    assert not stream.dirty
