"""Head, tail and head_tail windows: the incremental window equals the window of
everything written."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.execenv import head_tail_caps
from toolfold.output import OutputPolicy, OutputPolicyError
from toolfold.output._headtail import HeadTailWindow
from toolfold.output._retention import (
    TextWindow,
    count_lines,
    head_window,
    tail_window,
    utf8_len,
)

ALPHABET = st.sampled_from(["a", "b", "\n", "é", "😀", "中", " ", "\n\n"])
CHUNK = st.lists(ALPHABET, max_size=30).map("".join)
ACTION = st.one_of(
    st.tuples(st.just("write"), CHUNK),
    st.tuples(st.just("replace"), CHUNK),
)


def reference(
    full: str, retain: str, max_bytes: int, max_lines: int, head_share: float = 0.2
) -> tuple[str, dict[str, object]]:
    """The window and totals computed from the whole text in one go. head_tail is the
    two others put together: the whole text while it fits both caps, else the head
    window under the head's share of the caps followed by the tail window under the rest
    (the view without the marker the sink puts between them)."""
    fits = utf8_len(full) <= max_bytes and count_lines(full) <= max_lines
    partial = False
    if retain == "head_tail" and not fits:
        head_bytes, head_lines, tail_bytes, tail_lines = head_tail_caps(
            max_bytes, max_lines, head_share
        )
        head, _ = head_window(full, head_bytes, head_lines)
        tail, partial = tail_window(full, tail_bytes, tail_lines)
        view = head + tail
        # The marker goes between the parts, so a head ending inside a line and the
        # tail are two lines of the view.
        lines = count_lines(head) + count_lines(tail)
    elif retain == "tail":
        view, partial = tail_window(full, max_bytes, max_lines)
    else:
        view, _ = head_window(full, max_bytes, max_lines)
    if retain != "head_tail" or fits:
        lines = count_lines(view)
    totals = {
        "total_bytes": utf8_len(full),
        "total_lines": count_lines(full),
        "output_bytes": utf8_len(view),
        "output_lines": lines,
        "truncated": utf8_len(full) > utf8_len(view),
        "last_line_partial": partial,
    }
    return view, totals


def brute_tail(full: str, max_bytes: int, max_lines: int) -> str:
    """The definition, by exhaustive search: longest line-start suffix within both caps,
    else the last max_bytes bytes on a character boundary."""
    starts = [0] + [i + 1 for i, ch in enumerate(full) if ch == "\n" and i + 1 < len(full)]
    for s in starts:
        seg = full[s:]
        if utf8_len(seg) <= max_bytes and count_lines(seg) <= max_lines:
            return seg
    for s in range(len(full) + 1):
        if utf8_len(full[s:]) <= max_bytes:
            return full[s:]
    return ""


def brute_head(full: str, max_bytes: int, max_lines: int) -> str:
    """Longest prefix within max_bytes, ending at the max_lines-th newline at the latest."""
    best = ""
    newlines = 0
    for end in range(len(full) + 1):
        prefix = full[:end]
        if utf8_len(prefix) > max_bytes:
            break
        if end and full[end - 1] == "\n":
            newlines += 1
        if newlines > max_lines or (newlines == max_lines and not prefix.endswith("\n")):
            break
        best = prefix
    return best


@settings(max_examples=600)
@given(
    text=CHUNK,
    max_bytes=st.integers(1, 24),
    max_lines=st.integers(1, 5),
)
def test_pure_windows_match_their_definitions(text: str, max_bytes: int, max_lines: int) -> None:
    tail, _ = tail_window(text, max_bytes, max_lines)
    assert tail == brute_tail(text, max_bytes, max_lines)
    head, _ = head_window(text, max_bytes, max_lines)
    assert head == brute_head(text, max_bytes, max_lines)
    for view in (tail, head):
        assert utf8_len(view) <= max_bytes
        assert count_lines(view) <= max_lines


@settings(max_examples=800)
@given(
    actions=st.lists(ACTION, max_size=25),
    retain=st.sampled_from(["head", "tail", "head_tail"]),
    max_bytes=st.integers(1, 40),
    max_lines=st.integers(1, 6),
    head_share=st.sampled_from([0.2, 0.5, 0.9]),
    read_every=st.integers(1, 5),
)
def test_incremental_window_equals_window_of_everything(
    actions: list[tuple[str, str]],
    retain: Literal["head", "tail", "head_tail"],
    max_bytes: int,
    max_lines: int,
    head_share: float,
    read_every: int,
) -> None:
    if retain == "head_tail":  # one byte and one line for each part at least
        max_bytes, max_lines = max(max_bytes, 2), max(max_lines, 2)
    policy = OutputPolicy(
        retain=retain, max_bytes=max_bytes, max_lines=max_lines, head_share=head_share
    )
    window = HeadTailWindow(policy) if retain == "head_tail" else TextWindow(policy)
    full = ""
    for i, (kind, chunk) in enumerate(actions):
        if kind == "write":
            window.write(chunk)
            full += chunk
        else:
            window.replace(chunk)
            full = chunk
        if i % read_every == 0:
            view, totals = reference(full, retain, max_bytes, max_lines, head_share)
            assert window.text == view
            truncation = window.truncation()
            for key, value in totals.items():
                assert truncation[key] == value, key  # type: ignore[literal-required]
            assert truncation["output_bytes"] <= max_bytes
            assert truncation["output_lines"] <= max_lines
    view, _ = reference(full, retain, max_bytes, max_lines, head_share)
    assert window.text == view


def test_tail_truncated_by_names_the_binding_cap() -> None:
    by_lines = TextWindow(OutputPolicy(max_bytes=1000, max_lines=2))
    by_lines.write("a\nb\nc\n")
    assert by_lines.text == "b\nc\n"
    assert by_lines.truncation()["truncated_by"] == "lines"
    by_bytes = TextWindow(OutputPolicy(max_bytes=4, max_lines=100))
    by_bytes.write("aaaa\nbb\ncc\n")
    assert by_bytes.text == "cc\n"
    assert by_bytes.truncation()["truncated_by"] == "bytes"
    partial = TextWindow(OutputPolicy(max_bytes=4, max_lines=100))
    partial.write("0123456789")
    assert partial.text == "6789"
    assert partial.truncation()["last_line_partial"] is True


def test_head_keeps_counting_after_the_cap() -> None:
    window = TextWindow(OutputPolicy(retain="head", max_bytes=10, max_lines=100))
    window.write("0123456789abcdef\n")
    window.write("more\n")
    t = window.truncation()
    assert window.text == "0123456789"
    assert (t["total_bytes"], t["total_lines"], t["first_line_exceeds_limit"]) == (22, 2, True)
    assert t["truncated_by"] == "bytes"


def test_seeded_window_resumes_exact_totals() -> None:
    policy = OutputPolicy(max_bytes=8, max_lines=3)
    original = TextWindow(policy)
    original.write("one\ntwo\nthree\nfour")
    resumed = TextWindow(policy)
    resumed.seed(original.text, original.truncation())
    for w in (original, resumed):
        w.write("teen\nfive\n")
    assert resumed.text == original.text
    assert resumed.truncation() == original.truncation()


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"retain": "middle"}, "retain must be 'head', 'tail' or 'head_tail', got 'middle'"),
        ({"max_bytes": 0}, "max_bytes must be a positive int, got 0; pass a bound of at least 1"),
        ({"max_lines": True}, "max_lines must be a positive int, got True"),
        (
            {"max_image_bytes": 10, "max_total_image_bytes": 5},
            "max_total_image_bytes (5) is smaller than max_image_bytes (10); raise the total "
            "or lower the per-image bound",
        ),
        # One image allowed is enough for the total to have to hold it.
        ({"max_images": 1, "max_image_bytes": 10, "max_total_image_bytes": 9}, "(9) is smaller"),
    ],
)
def test_bad_policy_names_the_field(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(OutputPolicyError) as info:
        OutputPolicy(**kwargs)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_a_total_image_bound_equal_to_the_per_image_bound_is_accepted() -> None:
    policy = OutputPolicy(max_images=1, max_image_bytes=10, max_total_image_bytes=10)
    assert policy.max_total_image_bytes == policy.max_image_bytes == 10
