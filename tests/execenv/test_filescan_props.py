"""The chunked readers behind ``read`` and ``grep`` give what a whole-file reference gives,
wherever the chunks are cut: the line splitter's pieces, ``read``'s window and the
position its footer names for reading on, and ``grep``'s matching lines."""

from __future__ import annotations

import io
import itertools
import re
import threading
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolfold.execenv._filescan import (
    FileOpError,
    LineSplitter,
    Source,
    decode,
    line_local,
    raw_len,
    read_window,
    search_lines,
    shown,
)
from toolfold.execenv._headwindow import HeadWindow

# Bytes that stress every cut: newlines, CR, 2/3/4-byte characters, a byte that is never
# UTF-8, a truncated sequence and a lone continuation byte.
PIECES = [b"a", b"b", b"\n", b"\n", b"\r", "é".encode(), "€".encode(), "😀".encode()]
PIECES += [b"\xff", b"\xe2\x82", b"\x80"]
DATA = st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join)


class _Chunked(io.RawIOBase):
    """A file whose reads return at most ``n`` bytes (what Source sees of a real one,
    cut finer: /proc files and pipes return short reads too)."""

    def __init__(self, data: bytes, n: int) -> None:
        self._data = data
        self._pos = 0
        self._n = n

    def read(self, size: int = -1) -> bytes:
        size = self._n if size < 0 else min(size, self._n)
        out = self._data[self._pos : self._pos + size]
        self._pos += len(out)
        return out


def source(data: bytes, chunk: int, limit: int | None = None) -> Source:
    f: Any = _Chunked(data, chunk)
    return Source(f, len(data) if limit is None else limit, threading.Event(), chunk)


def split_reference(data: bytes, size: int) -> list[tuple[bytes, bool]]:
    out: list[tuple[bytes, bool]] = []
    for line in re.findall(rb"[^\n]*\n|[^\n]+$", data):
        for i in range(0, len(line), size):
            piece = line[i : i + size]
            out.append((piece, piece.endswith(b"\n")))
    return out


@given(data=DATA, size=st.integers(1, 9), cuts=st.lists(st.integers(0, 300), max_size=8))
def test_line_pieces_do_not_depend_on_where_chunks_are_cut(
    data: bytes, size: int, cuts: list[int]
) -> None:
    splitter = LineSplitter(size)
    got: list[tuple[bytes, bool]] = []
    edges = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for a, b in itertools.pairwise(edges):
        got.extend(splitter.feed(data[a:b]))
    got.extend(splitter.finish())
    assert got == split_reference(data, size)
    assert all(len(piece) <= size for piece, _ in got)


def read_reference(
    data: bytes,
    start: int,
    line_byte: int,
    limit: int | None,
    max_bytes: int,
    max_lines: int,
    scan: int,
) -> dict[str, Any]:
    """``read_window`` on the whole file at once, written the plain way."""
    d = data[:scan]
    newlines = [i for i, b in enumerate(d) if b == 0x0A]
    window = HeadWindow(max_bytes, max_lines)
    if start - 1 > len(newlines):
        return {
            "error": None,
            "window": window.result(),
            "shown": 0,
            "more": False,
            "counted_all": scan >= len(data),
            "resume": None,
        }
    line_start = newlines[start - 2] + 1 if start > 1 else 0
    line_end = next((i for i in newlines if i >= line_start), len(d))
    if line_byte > line_end - line_start:
        return {"error": "past the end"}
    begin = line_start + line_byte
    end, at_limit = len(d), False
    if limit is not None:
        after = [i for i in newlines if i >= begin]
        if len(after) >= limit:
            end, at_limit = after[limit - 1] + 1, True
    region = d[begin:end]
    text = decode(region)
    kept = window.write(shown(text))
    more = end < len(data) if at_limit else scan < len(data)
    resume: int | None = None
    if kept < len(text):
        k = raw_len(text[:kept])
        mid_line = begin + k > 0 and d[begin + k - 1] != 0x0A
        resume = begin + k + (1 if mid_line and region[k] == 0x0A else 0)
    elif more:
        resume = end
    if resume is not None and resume == end and not more:
        resume = None
    tail = region.rpartition(b"\n")
    line_pos = len(tail[2]) if tail[1] else line_byte + len(region)
    where = None
    if resume is not None:
        where = (1 + data.count(b"\n", 0, resume), resume - (data.rfind(b"\n", 0, resume) + 1))
    return {
        "error": None,
        "window": window.result(),
        "shown": region.count(b"\n") + (1 if line_pos else 0),
        "more": more,
        "counted_all": not more,
        "resume": where,
    }


@given(
    data=DATA,
    chunk=st.integers(1, 12),
    start=st.integers(1, 5),
    line_byte=st.sampled_from([0, 0, 1, 2, 5]),
    limit=st.none() | st.integers(1, 4),
    max_bytes=st.integers(1, 40),
    max_lines=st.integers(1, 6),
    scan_cut=st.none() | st.integers(0, 40),
)
def test_read_window_matches_the_whole_file_reference(
    data: bytes,
    chunk: int,
    start: int,
    line_byte: int,
    limit: int | None,
    max_bytes: int,
    max_lines: int,
    scan_cut: int | None,
) -> None:
    scan = len(data) if scan_cut is None else min(scan_cut, len(data))
    want = read_reference(data, start, line_byte, limit, max_bytes, max_lines, scan)
    window = HeadWindow(max_bytes, max_lines)
    try:
        got = read_window(source(data, chunk, scan), window, start, line_byte, limit)
    except FileOpError as exc:
        assert want["error"] == "past the end", exc
        assert f"line_byte {line_byte} is past the end of line {start}" in str(exc)
        return
    assert want["error"] is None
    assert window.result() == want["window"]
    assert got["shown"] == want["shown"]
    assert got["more"] == want["more"]
    assert got["counted_all"] == want["counted_all"]
    resume = None if got["resume_line"] is None else (got["resume_line"], got["resume_byte"])
    assert resume == want["resume"]


@given(
    data=DATA, chunk=st.integers(1, 12), max_bytes=st.integers(4, 30), max_lines=st.integers(1, 5)
)
def test_following_the_footer_reads_every_byte_once(
    data: bytes, chunk: int, max_bytes: int, max_lines: int
) -> None:
    """Page through a file the way a model would, from each answer's resume point:
    the pages put together are the whole file (each bad byte shown as U+FFFD)."""
    pages: list[str] = []
    line, byte = 1, 0
    for _ in range(len(data) + 2):
        window = HeadWindow(max_bytes, max_lines)
        got = read_window(source(data, chunk), window, line, byte, None)
        text = window.result()["text"]
        pages.append(text)
        if got["resume_line"] is None:
            if window.result()["truncated"]:  # all it left out is the file's last newline
                pages.append("\n")
            break
        if got["resume_byte"] == 0 and text and not text.endswith("\n"):
            pages.append("\n")  # the cut was only the newline: reading on starts a line
        line, byte = got["resume_line"], got["resume_byte"]
    else:
        pytest.fail("paging never reached the end")
    assert "".join(pages) == shown(decode(data))


@given(
    data=DATA,
    chunk=st.integers(1, 12),
    segment=st.integers(1, 10),
    needle=st.sampled_from(["a", "ab", "ba", "b\r", "é", "a|€b", "[ab]é"]),
)
def test_search_finds_the_lines_a_whole_line_search_finds(
    data: bytes, chunk: int, segment: int, needle: str
) -> None:
    """Plain patterns, long lines cut into segments: the 4-byte overlap is enough."""
    regex = re.compile(needle)
    got = [n for n, _ in search_lines(source(data, chunk), regex, 500, segment, 4)]
    lines = re.findall(rb"[^\n]*\n|[^\n]+$", data)
    assert got == [i for i, line in enumerate(lines, 1) if regex.search(decode(line))]


ANCHORED = ["^a", "a$", "^$", r"\bb", r"b\b", "^", "$", r"\w+\r$", "a.?b", r"[ab]\S"]
ANCHORED += [r"\Ba", "(?=a)", "(?<!a)b", "(?m)b$", r"a\s", r"\sb", "[^a]", "\n", r"\Aa", r"b\Z"]


LINES = st.lists(
    st.sampled_from([b"a", b"b", b"A", b" ", b"\r", "é".encode(), b"\xff"]), max_size=4
)
MANY_LINES = st.lists(LINES.map(b"".join), min_size=2, max_size=12).map(b"\n".join)


@settings(max_examples=400)
@given(
    data=MANY_LINES,
    chunk=st.integers(1, 300),
    needle=st.sampled_from(ANCHORED),
    ignore_case=st.booleans(),
)
@example(data=b"x\nx\na\nb\nab\n", chunk=300, needle=r"\Aa", ignore_case=False)
@example(data=b"x\nb\nab\nx", chunk=300, needle=r"b\Z", ignore_case=False)
@example(data=b"x\nb\nab\nx", chunk=300, needle="\n", ignore_case=False)
@example(data=b"x\nx\nx\n", chunk=300, needle=r"\B", ignore_case=False)
def test_search_by_blocks_matches_what_each_line_alone_matches(
    data: bytes, chunk: int, needle: str, ignore_case: bool
) -> None:
    """Anchors, boundaries and newline-matching patterns, each line searched whole:
    the one-pass block search (for patterns that cannot see past a line) and the
    line-by-line one (for the others) both give what searching each line alone gives."""
    regex = re.compile(needle, re.IGNORECASE if ignore_case else 0)
    got = list(search_lines(source(data, chunk), regex, 500, 1 << 20, 4))
    lines = re.findall(rb"[^\n]*\n|[^\n]+$", data)
    want = [i for i, line in enumerate(lines, 1) if regex.search(decode(line))]
    assert [n for n, _ in got] == want
    for n, text in got:
        assert text == shown(decode(lines[n - 1]).rstrip("\r\n"))


def test_only_patterns_that_stay_inside_a_line_are_searched_by_blocks() -> None:
    local = ["a", "^def \\w+\\(", "x$", "[a-z]+\\.py", "\\bfoo\\b", "a\\\\n", "\\S+"]
    other = ["a\\s", "[^a]", "(?=x)", "(?s).", "\\Ax", "x\\Z", "\\Bx", "[\\t-\\r]", "a\n", "\\x0a"]
    assert all(line_local(re.compile(p)) for p in local)
    assert not any(line_local(re.compile(p)) for p in other)
    assert not line_local(re.compile("a.", re.DOTALL))


def test_a_line_cut_for_grep_names_its_first_unshown_byte() -> None:
    line = "é" * 600 + "needle"
    hits = list(search_lines(source(line.encode() + b"\n", 4096), re.compile("needle"), 500))
    assert hits == [(1, "é" * 500 + " [line cut; read offset=1, line_byte=1000 for the rest]")]


@given(head=DATA, rest=st.lists(DATA, max_size=5), max_bytes=st.integers(1, 20))
def test_tallying_bytes_counts_what_writing_their_text_counts(
    head: bytes, rest: list[bytes], max_bytes: int
) -> None:
    written, tallied = HeadWindow(max_bytes, 3), HeadWindow(max_bytes, 3)
    for window in (written, tallied):
        window.write(shown(decode(head)))
        window.write("x" * (max_bytes + 1))  # full from here on
    for data in rest:
        written.write(decode(data))
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            tallied.write(decode(data))  # what read_window does with bytes that are not UTF-8
        else:
            tallied.tally(data, data.count(b"\n"))
    assert tallied.result() == written.result()
