"""Edge cases of OutputCapture that the reference-model properties rarely draw.

Each pins one decision of the streaming capture that a mutation run showed no test made:
see docs/TESTING.md, "Mutation testing".
"""

from __future__ import annotations

import re

import pytest
from execenv_helpers import reference_view

from toolfold.execenv import (
    CaptureClosedError,
    HeadTailCapture,
    OutputCapture,
    ShellOutputLimits,
    _capture,
    capture_for,
)

RETAINS = ["head", "tail", "head_tail"]


def _fed(chunks: list[bytes], lim: ShellOutputLimits) -> OutputCapture | HeadTailCapture:
    cap = capture_for(lim)
    for chunk in chunks:
        cap.feed(chunk)
    cap.close()
    return cap


def _held(cap: OutputCapture | HeadTailCapture) -> list[tuple[OutputCapture, int]]:
    """Each single-mode capture inside ``cap`` with the most characters of a line it may
    hold: a head one max_bytes + 1 (the one past the cap says "cut"), a tail one
    4 x max_bytes (trimmed back to 2 x). A head_tail capture is three of them: a head
    under the whole caps, a head under the head's share and a tail under the rest."""
    parts = [cap._whole, cap._head, cap._tail] if isinstance(cap, HeadTailCapture) else [cap]
    return [
        (
            part,
            part.limits.max_bytes + 1
            if part.limits.retain == "head"
            else 4 * part.limits.max_bytes,
        )
        for part in parts
    ]


def test_an_8bit_csi_split_right_after_the_first_character_is_held_back_whole() -> None:
    # U+009B at index 1 of a read, its parameters cut by the read boundary: the partial
    # sequence must wait for the next read, not be cleaned as a lone C1 control (which
    # would leave its parameters "31m" in the view).
    for retain in RETAINS:
        cap = _fed(["a\x9b3".encode(), b"1m\n"], ShellOutputLimits(retain=retain))
        assert cap.snapshot().text == "a\n"


def test_a_large_read_of_escaped_lines_skips_by_the_line_count_alone() -> None:
    # Every line carries an escape, so the byte rule of the skip cannot be trusted; the
    # read (smaller than max_bytes) holds more than max_lines newlines, which decides the
    # tail view by itself, so the lines before the view are never decoded.
    lim = ShellOutputLimits(max_bytes=100, max_lines=5)
    cap = OutputCapture(lim)
    cap.feed(b"".join(b"\x1b[1m%d\n" % i for i in range(10)))
    assert cap._skipped
    snap = cap.snapshot()
    assert snap.text == "5\n6\n7\n8\n9\n"
    assert snap.start == (5, 0)
    assert (snap.truncation.truncated, snap.truncation.truncated_by) == (True, "lines")
    assert (snap.truncation.total_lines, snap.truncation.total_bytes) == (10, 60)


def test_a_large_read_of_long_plain_lines_skips_by_the_byte_count_alone() -> None:
    # Fewer newlines than max_lines, but a complete plain line alone is larger than
    # max_bytes: the suffix starting with it decides the tail view, so the lines before
    # it are skipped.
    lim = ShellOutputLimits(max_bytes=10, max_lines=5)
    cap = OutputCapture(lim)
    cap.feed(b"x" * 30 + b"\n" + b"y" * 30 + b"\n" + b"z" * 30)
    assert cap._skipped
    snap = cap.snapshot()
    assert snap.text == "z" * 10
    assert snap.start == (2, 20)
    assert snap.truncation.last_line_partial
    assert (snap.truncation.total_lines, snap.truncation.total_bytes) == (3, 92)


@pytest.mark.parametrize(
    ("raw", "text", "start"),
    [
        # An escape in the middle line: only the next line start gives a plain suffix.
        (
            b"a" * 30 + b"\n\x1b[1m" + b"y" * 30 + b"\n" + b"x" * 30 + b"\n" + b"z" * 30,
            "z" * 10,
            (3, 20),
        ),
        # A \r before the deciding line start does not matter.
        (b"a\rb\n" + b"y" * 40 + b"\n" + b"z" * 30, "z" * 10, (2, 20)),
        # A complete line exactly max_bytes + 4 bytes long (with its newline) decides.
        (b"a" * 40 + b"\n" + b"y" * 13 + b"\n" + b"zzz", "zzz", (2, 0)),
    ],
)
def test_the_skip_takes_the_last_line_start_far_enough_from_the_end(
    raw: bytes, text: str, start: tuple[int, int]
) -> None:
    cap = OutputCapture(ShellOutputLimits(max_bytes=10, max_lines=5))
    cap.feed(raw)
    assert cap._skipped
    snap = cap.snapshot()
    assert (snap.text, snap.start) == (text, start)


@pytest.mark.parametrize(
    "raw",
    [
        # The only newline is the read's first byte: the long line after it is unfinished.
        b"\n" + b"z" * 60,
        # The complete line is one byte short of max_bytes + 4.
        b"a" * 40 + b"\n" + b"y" * 12 + b"\n" + b"zzz",
    ],
)
def test_an_unfinished_or_short_last_line_does_not_decide_the_skip(raw: bytes) -> None:
    cap = OutputCapture(ShellOutputLimits(max_bytes=10, max_lines=5))
    cap.feed(raw)
    assert not cap._skipped


@pytest.mark.parametrize(
    ("before", "text", "start"),
    [
        (b"b\n" * 5, "b\nb\nb\nb\nw", (1, 0)),
        (b"\n", "\nw", (0, 0)),
    ],
)
def test_a_long_current_line_redrawn_short_by_a_later_read_brings_back_the_lines_before(
    before: bytes, text: str, start: tuple[int, int]
) -> None:
    # A large read ends in a current line longer than max_bytes; the next read redraws it
    # to one character, so the lines before it are in the tail view again. The capture
    # must not have skipped them (it did: its view was "w" alone, unlike the same bytes
    # in one read).
    lim = ShellOutputLimits(max_bytes=10, max_lines=40)
    for chunks in ([before + b"z" * 60, b"\rw"], [before + b"z" * 60 + b"\rw"]):
        snap = _fed(chunks, lim).snapshot()
        assert (snap.text, snap.start) == (text, start)


def test_a_large_read_whose_last_line_is_redrawn_short_is_not_skipped() -> None:
    # The last line's raw bytes exceed max_bytes, but a \r redraw leaves one character:
    # the lines before it still reach the tail view, so none of them may be skipped.
    cap = OutputCapture(ShellOutputLimits(max_bytes=10, max_lines=40))
    cap.feed(b"b\n" * 5 + b"z" * 50 + b"\rw")
    assert not cap._skipped
    assert cap.snapshot().text == "b\nb\nb\nb\nw"


def test_a_large_read_whose_long_complete_line_is_redrawn_short_is_not_skipped() -> None:
    # The complete line's raw bytes exceed max_bytes, but a \r redraw leaves "z": its raw
    # size says nothing, and the lines before it are in the tail view.
    cap = OutputCapture(ShellOutputLimits(max_bytes=10, max_lines=5))
    cap.feed(b"b\n" * 3 + b"y" * 40 + b"\rz\n")
    assert not cap._skipped
    assert cap.snapshot().text == "b\nb\nb\nz\n"


def test_a_suffix_with_exactly_max_lines_plus_one_newlines_decides_the_tail_view() -> None:
    # Escapes on every line rule out the byte rule; the suffix after the first line holds
    # max_lines + 1 newlines, just enough to decide a max_lines tail view by itself.
    lines = [b"\x1b[1m" + b"x" * 15 + b"\n"] + [b"\x1b[1m%04d\n" % i for i in range(5)]
    cap = OutputCapture(ShellOutputLimits(max_bytes=100, max_lines=5))
    cap.feed(b"\x1b[1m0\n" + b"".join(lines))
    assert cap._skipped
    snap = cap.snapshot()
    assert snap.text == "0000\n0001\n0002\n0003\n0004\n"
    assert snap.start == (2, 0)


def test_a_settled_head_capture_closes_like_any_other() -> None:
    # Past the cap a head capture stops decoding ("settled"); close() must still close it.
    cap = OutputCapture(ShellOutputLimits(max_bytes=4, max_lines=2, retain="head"))
    cap.feed(b"one\ntwo\nthree\n")
    cap.close()
    assert cap.closed
    with pytest.raises(CaptureClosedError, match="4 bytes fed to a closed OutputCapture"):
        cap.feed(b"four")
    assert cap.snapshot().truncation.total_lines == 3


@pytest.mark.parametrize(
    ("raw", "text", "start"),
    [
        # The current (unterminated) line alone exceeds the cap.
        (b"a\n" + b"z" * 30, "z" * 10, (1, 20)),
        # The last completed line alone exceeds the cap: the view keeps its newline.
        (b"a\n" + b"z" * 30 + b"\n", "z" * 9 + "\n", (1, 21)),
    ],
)
def test_a_partial_tail_view_starts_at_its_column_in_the_line(
    raw: bytes, text: str, start: tuple[int, int]
) -> None:
    # start is what a consumer uses to tell a slide from a replace: it must be exact.
    for chunks in ([raw], [raw[i : i + 1] for i in range(len(raw))]):
        snap = _fed(chunks, ShellOutputLimits(max_bytes=10, max_lines=5)).snapshot()
        assert (snap.text, snap.start, snap.truncation.last_line_partial) == (text, start, True)


@pytest.mark.parametrize(("size", "skipped"), [(47, False), (48, True)])
def test_only_reads_of_at_least_four_times_the_skip_window_try_to_skip(
    size: int, skipped: bool
) -> None:
    # max_bytes=10, max_lines=5: the smallest deciding suffix is 14 bytes or 12 newlines,
    # so a read shorter than 4 * 12 = 48 bytes is decoded whole (searching would cost more).
    cap = OutputCapture(ShellOutputLimits(max_bytes=10, max_lines=5))
    cap.feed(b"\n" + b"y" * (size - 2) + b"\n")
    assert cap._skipped is skipped
    assert cap.snapshot().text == "y" * 9 + "\n"


def test_output_of_exactly_max_bytes_is_within_the_cap() -> None:
    for raw in (b"abcd", b"abc\n"):
        cap = OutputCapture(ShellOutputLimits(max_bytes=4, max_lines=5, retain="head"))
        cap.feed(raw)
        assert not cap.exceeds_cap
        cap.feed(b"x")
        assert cap.exceeds_cap
    # A head view of three bytes still takes a fourth.
    cap = _fed([b"ab\n", b"x"], ShellOutputLimits(max_bytes=4, max_lines=5, retain="head"))
    assert cap.snapshot().text == "ab\nx"


def test_a_head_capture_stops_decoding_as_soon_as_its_view_is_final() -> None:
    # "abc\n" fills the 4-byte head view; the first byte after it makes the cleaned stream
    # longer than the view, so nothing later can change the view: the capture stops
    # decoding (only the raw totals move) instead of cleaning output nobody will see.
    cap = OutputCapture(ShellOutputLimits(max_bytes=4, max_lines=5, retain="head"))
    cap.feed(b"abc\n")
    assert not cap._settled
    cap.feed(b"x")
    assert cap._settled
    cap.feed(b"\x1b[1my\n" * 3)
    snap = cap.snapshot()
    assert snap.text == "abc\n"
    assert (snap.truncation.truncated, snap.truncation.truncated_by) == (True, "bytes")
    assert (snap.truncation.total_lines, snap.truncation.total_bytes) == (4, 23)


@pytest.mark.parametrize("retain", RETAINS)
@pytest.mark.parametrize("piece", [b"\xff", b"\xff\n"])
def test_output_that_cleanup_grows_past_the_cap_over_several_reads_exceeds_it(
    retain: str, piece: bytes
) -> None:
    # Each invalid byte becomes U+FFFD, three bytes: two reads of b"\xff" (in one line or
    # in two) are 2 or 4 raw bytes but 6 or 8 cleaned ones, over a 4-byte cap. exceeds_cap
    # is what starts the spill file, so a view cut like this one must say so, or the
    # output would be lost.
    cap = capture_for(ShellOutputLimits(max_bytes=4, max_lines=5, retain=retain))
    cap.feed(piece)
    assert not cap.exceeds_cap
    cap.feed(piece)
    assert cap.exceeds_cap
    assert cap.snapshot().truncation.truncated


@pytest.mark.parametrize("retain", RETAINS)
def test_a_long_line_in_many_reads_is_held_in_bounded_memory(retain: str) -> None:
    # The module's promise: memory does not depend on the size of the output. A head
    # capture keeps max_bytes + 1 characters of a line (the one past the cap says "cut"),
    # a tail capture at most 4 x max_bytes (trimmed back to 2 x); head_tail each of its
    # three captures' bound (11, 3 and 32 characters here).
    lim = ShellOutputLimits(max_bytes=10, max_lines=5, retain=retain)
    cap = capture_for(lim)
    bounds = [bound for _, bound in _held(cap)]
    assert bounds == {"head": [11], "tail": [40], "head_tail": [11, 3, 32]}[retain]
    # Reads of 4 characters, then also of 32 (longer than the 2 x max_bytes a trim keeps).
    pieces = [f"{i:04d}" * (8 if i % 2 and i >= 100 else 1) for i in range(200)]
    for piece in pieces:
        cap.feed(piece.encode())
        for part, bound in _held(cap):
            assert len(part._cur) <= bound
    cap.close()
    whole = "".join(pieces)
    # head_tail: 2 bytes (20 % of 10) of the start, the last 8 of the end.
    view = {"head": whole[:10], "tail": whole[-10:], "head_tail": whole[:2] + whole[-8:]}
    assert cap.snapshot().text == view[retain]


def test_a_head_capture_full_by_its_line_count_stops_decoding_too() -> None:
    # max_lines complete lines decide the head view just as max_bytes do, whichever reads
    # they came in.
    cap = OutputCapture(ShellOutputLimits(max_bytes=100, max_lines=2, retain="head"))
    cap.feed(b"a\n")
    cap.feed(b"b\n")
    assert not cap._settled
    cap.feed(b"c")
    assert cap._settled
    snap = cap.snapshot()
    assert snap.text == "a\nb\n"
    assert (snap.truncation.truncated, snap.truncation.truncated_by) == (True, "lines")


@pytest.mark.parametrize(
    "reads",
    [
        [b"abcd\n"] * 40,
        # 30 characters of lines, then a read whose complete lines are exactly 2 x max_bytes
        # characters: the trim keeps just those.
        [b"abcd\n" * 6, b"efgh\n" * 4],
        [b"abcd\n" * 7 + b"xy", b"z\n", b"efgh\n" * 4 + b"ij"],
    ],
)
@pytest.mark.parametrize("retain", RETAINS)
def test_many_lines_are_held_in_bounded_memory(reads: list[bytes], retain: str) -> None:
    # A tail capture trims its completed lines from 4 x max_bytes back to 2 x max_bytes
    # characters; a head capture keeps max_bytes + 1 characters once its view is decided;
    # a head_tail capture holds no more than its three captures do.
    lim = ShellOutputLimits(max_bytes=10, max_lines=5, retain=retain)
    cap = capture_for(lim)
    for data in reads:
        cap.feed(data)
        for part, bound in _held(cap):
            assert len(part._done) <= bound
    cap.close()
    assert cap.snapshot().text == reference_view(b"".join(reads), 10, 5, retain).text


def test_a_head_view_starts_at_the_start_of_the_stream() -> None:
    # start is documented as where the view's text starts in the cleaned stream: for a
    # head view that is always line 0, column 0, cut or not.
    for raw in (b"", b"ab", b"abc\ndef\nghi\n" * 3):
        cap = _fed([raw], ShellOutputLimits(max_bytes=4, max_lines=2, retain="head"))
        assert cap.snapshot().start == (0, 0)


@pytest.mark.parametrize("retain", RETAINS)
@pytest.mark.parametrize(
    ("raw", "lines", "size"), [(b"", 0, 0), (b"a\nb", 2, 3), (b"a\nb\n", 2, 4), (b"\xc3\xa9", 1, 2)]
)
def test_the_view_counts_a_final_line_without_newline_as_a_line(
    retain: str, raw: bytes, lines: int, size: int
) -> None:
    snap = _fed([raw], ShellOutputLimits(max_bytes=10, max_lines=5, retain=retain)).snapshot()
    assert (snap.truncation.output_lines, snap.truncation.output_bytes) == (lines, size)


class _CountingEscape:
    """Stands in for the capture's escape regex and counts the passes made with it."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern, self.passes = pattern, 0

    def sub(self, repl: str, text: str) -> str:
        self.passes += 1
        return self.pattern.sub(repl, text)


SPLIT = [b"plain text\n", "é, split".encode()[:1], "é, split".encode()[1:]]
"""A plain line, then a read ending inside "é" and one starting by completing it."""


@pytest.mark.parametrize(
    ("retain", "max_bytes", "reads", "skips", "passes"),
    [
        ("head", 10, SPLIT, [False], 1),
        # Large reads that skip, by the byte rule and by the line rule.
        ("tail", 10, [b"a\n" + b"x" * 60 + b"\n" + b"z"], [True], 0),
        ("tail", 100, [b"a\n" * 100], [True], 0),
        # head_tail: its captures (a head under the whole caps, a head under 2 bytes and
        # 1 line, a tail under the rest) each check the completing read once while they
        # still decode; the small head is decided by the first read, so it does not.
        ("head_tail", 10, SPLIT, [False, False, False], 2),
        # Its tail skips as the tail mode does; the heads stop decoding once decided.
        ("head_tail", 10, [b"a\n" + b"x" * 60 + b"\n" + b"z"], [False, False, True], 0),
        ("head_tail", 100, [b"a\n" * 100], [False, False, True], 0),
    ],
)
def test_plain_reads_never_go_through_the_escape_regex(
    monkeypatch: pytest.MonkeyPatch,
    retain: str,
    max_bytes: int,
    reads: list[bytes],
    skips: list[bool],
    passes: int,
) -> None:
    # The common case, and the fast one: a read without control bytes (\t \n \r aside)
    # needs no cleanup pass. Only a read whose first byte completes a code point held from
    # the previous read is checked, as that code point may be a C1 control.
    counter = _CountingEscape(_capture._escape())
    monkeypatch.setattr(_capture, "_escape", lambda: counter)
    cap = _fed(reads, ShellOutputLimits(max_bytes=max_bytes, max_lines=5, retain=retain))
    assert [part._skipped for part, _ in _held(cap)] == skips
    assert counter.passes == passes
    raw = b"".join(reads)
    assert cap.snapshot().text == reference_view(raw, max_bytes, 5, retain).text
