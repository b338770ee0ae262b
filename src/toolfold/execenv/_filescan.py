"""Reading a file in bounded chunks, for ``read`` and ``grep`` (local and on an exec host).

Whatever the file is — one 1.5 GB line, a file that grows while it is read, a
``/proc`` file — what is held is the window plus a fixed buffer: the file is read
``CHUNK`` bytes at a time and never a whole line at once. Devices, pipes and sockets
are refused (``open_regular``): ``/dev/zero`` never ends and a FIFO blocks until
someone writes, and neither is what a "file" argument usually means.

A scan stops at the file's size when it was opened (so a file that grows faster
than it is read still ends), or after ``PSEUDO_FILE_LIMIT`` bytes for files that
report no size (procfs, sysfs). When bytes remain past that bound the result says
so, and how to read on.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import threading
from collections.abc import Iterator
from io import FileIO
from pathlib import Path
from typing import Any

from ._headwindow import HeadWindow

CHUNK = 256 * 1024
"""Bytes read per system call (and the most a reader holds of the file at once)."""

PSEUDO_FILE_LIMIT = 64 * 1024 * 1024
"""Most bytes scanned in a file whose size reads as 0 (``/proc``, ``/sys``)."""

_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class FileOpError(Exception):
    """A file operation's arguments or target are unusable; the message says which."""


def open_regular(path: Path) -> tuple[FileIO, int]:
    """``path`` opened for reading, and how many bytes a scan of it may read.

    The one place ``read`` and ``grep`` open a file. It is opened non-blocking (a FIFO
    would otherwise block ``open`` until a writer comes) and checked on the open
    descriptor, so a path swapped for a device between a check and the open cannot
    slip through. Anything but a regular file raises ``FileOpError``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket (or a device with no driver) cannot be opened
            _refuse(path, os.stat(path).st_mode)
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _refuse(path, st.st_mode)
        os.set_blocking(fd, True)
        return FileIO(fd, "rb", closefd=True), st.st_size or PSEUDO_FILE_LIMIT
    except BaseException:
        os.close(fd)
        raise


def _refuse(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):
        raise FileOpError(f"{path} is a directory; list it with bash (ls) instead")
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    raise FileOpError(
        f"{path} is {kind}, not a regular file; read and grep only read regular "
        f"files (a device or pipe may never end or block): use bash with a bound, "
        f"e.g. timeout 5 head -c 65536 {path}"
    )


class Source:
    """A file's bytes in chunks of at most ``chunk``, with push-back.

    Ends (returns ``b""``) at end of file, after ``limit`` bytes, or once ``cancel``
    is set. ``cut_short`` tells, after the end, whether bytes remained past ``limit``.
    """

    def __init__(self, f: FileIO, limit: int, cancel: threading.Event, chunk: int = CHUNK) -> None:
        self._f = f
        self._left = limit
        self._cancel = cancel
        self._chunk = chunk
        self._back = b""
        self.cut_short = False
        self._probed = False

    def next(self) -> bytes:
        if self._back:
            data, self._back = self._back, b""
            return data
        if self._cancel.is_set():
            return b""
        if self._left <= 0:
            if not self._probed:  # one byte tells "ended at the bound" from "ended"
                self._probed = True
                self.cut_short = bool(self._f.read(1))
            return b""
        data = self._f.read(min(self._chunk, self._left)) or b""
        self._left -= len(data)
        if not data:
            self._left = 0
            self._probed = True
        return data

    def unread(self, data: bytes) -> None:
        """Give back the unused end of the last chunk (the next ``next()`` returns it)."""
        if data:
            self._back = data + self._back

    def text_chunk(self) -> bytes:
        """The next chunk, ending on a UTF-8 character boundary unless the file ends
        there (the cut-off bytes of a character come back with the next chunk), so
        each chunk decodes alone."""
        data = self.next()
        while data:
            cut = _complete_utf8(data)
            if cut == len(data):
                return data
            if cut > 0:
                self.unread(data[cut:])
                return data[:cut]
            more = self.next()
            if not more:
                return data
            data += more
        return data


def _complete_utf8(data: bytes) -> int:
    """Length of ``data`` without a trailing incomplete UTF-8 sequence."""
    n = len(data)
    for i in range(1, min(4, n + 1)):
        b = data[n - i]
        if b < 0x80:
            return n
        if b >= 0xC0:  # a lead byte: complete if its sequence fits in what follows
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return n if need <= i else n - i
    return n


_SURROGATES = {c: 0xFFFD for c in range(0xDC80, 0xDD00)}


def decode(data: bytes) -> str:
    """``data`` as text, each byte that is not UTF-8 as one lone surrogate (so a
    prefix of the text maps back to exactly the bytes it came from)."""
    return data.decode("utf-8", "surrogateescape")


def shown(text: str) -> str:
    """``decode``'s text as it is shown: each undecodable byte becomes U+FFFD."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.translate(_SURROGATES)
    return text


def raw_len(text: str) -> int:
    """How many file bytes ``decode`` turned into ``text``."""
    return len(text.encode("utf-8", "surrogateescape"))


class LineSplitter:
    """Cuts a byte stream, fed in chunks cut anywhere, into line pieces.

    Each line (with its ``\\n``) comes out as pieces of exactly ``size`` bytes and a
    last, shorter one; ``(piece, ends_line)``. The pieces do not depend on where the
    chunks were cut, and at most ``size`` bytes are buffered, however long the line.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"piece size must be positive, got {size}")
        self.size = size
        self._buf = bytearray()

    def feed(self, data: bytes) -> Iterator[tuple[bytes, bool]]:
        size = self.size
        buf = self._buf
        pos = 0
        n = len(data)
        while pos < n:
            nl = data.find(b"\n", pos)
            end = n if nl < 0 else nl + 1
            if not buf and end - pos <= size and nl >= 0:
                yield data[pos:end], True  # the common case: a short line, no copy
                pos = end
                continue
            while pos < end:
                take = min(end - pos, size - len(buf))
                buf += data[pos : pos + take]
                pos += take
                if len(buf) == size or (pos == end and nl >= 0):
                    piece = bytes(buf)
                    buf.clear()
                    yield piece, piece.endswith(b"\n")

    def finish(self) -> Iterator[tuple[bytes, bool]]:
        """The last line's rest when the stream ends without a newline."""
        if self._buf:
            piece = bytes(self._buf)
            self._buf.clear()
            yield piece, False


def _nth_newline(data: bytes, n: int) -> int:
    """Index of the ``n``-th ``\\n`` in ``data`` (``n`` >= 1; the caller counted them)."""
    pos = -1
    for _ in range(n):
        pos = data.index(b"\n", pos + 1)
    return pos


def read_window(
    src: Source, window: HeadWindow, start: int, line_byte: int, limit: int | None
) -> dict[str, Any]:
    """Write lines ``start``.. of ``src`` (from byte ``line_byte`` of line ``start``; at
    most ``limit`` lines) into ``window``, a chunk at a time.

    Without ``limit`` the rest of the file is still read, to count it, once the window
    is full. Returns ``shown`` (lines read from ``start``), ``more`` (bytes remain
    unread: past ``limit`` or past the scan bound), ``counted_all`` (the scan reached
    the end of the file) and ``resume_line`` / ``resume_byte``: where the first byte
    not in the window is (line and byte within that line), or ``None`` when the
    window holds everything that was there.
    """
    line = 1
    while line < start:
        data = src.next()
        if not data:
            return {
                "shown": 0,
                "more": False,
                "counted_all": not src.cut_short,
                "resume_line": None,
                "resume_byte": None,
            }
        n = data.count(b"\n")
        if n < start - line:
            line += n
            continue
        src.unread(data[_nth_newline(data, start - line) + 1 :])
        line = start
    skipped = 0
    while skipped < line_byte:
        data = src.next()
        take = min(len(data), line_byte - skipped)
        nl = data.find(b"\n", 0, take)
        if not data or nl >= 0:
            length = skipped + (nl if nl >= 0 else 0)
            raise FileOpError(
                f"line_byte {line_byte} is past the end of line {start}, which has "
                f"{length:,} bytes; use a smaller line_byte, or offset={start + 1}"
            )
        skipped += take
        src.unread(data[take:])

    lineno, line_pos = start, line_byte  # where the next unread byte is
    pos = 0  # bytes read since then
    newlines = 0
    resume: tuple[int, int, int] | None = None  # line, byte in it, bytes read before it
    at_limit = False
    while True:
        data = src.text_chunk()
        if not data:
            break
        if limit is not None and data.count(b"\n") >= limit - newlines:
            end = _nth_newline(data, limit - newlines) + 1
            src.unread(data[end:])
            data, at_limit = data[:end], True
        n = data.count(b"\n")
        if resume is None:
            text = decode(data)
            kept = window.write(shown(text))
            if kept < len(text):
                k = raw_len(text[:kept])
                line, byte = _locate(data, k, lineno, line_pos)
                if byte and data[k] == 0x0A:  # only a line's newline is cut: the next line
                    line, byte, k = line + 1, 0, k + 1
                resume = (line, byte, pos + k)
        elif _is_utf8(data):
            window.tally(data, n)  # only counted, and UTF-8 already: no need to decode
        else:
            window.write(decode(data))  # a surrogate counts 3 bytes, as U+FFFD does
        if n:
            lineno += n
            line_pos = len(data) - data.rindex(b"\n") - 1
        else:
            line_pos += len(data)
        newlines += n
        pos += len(data)
        if at_limit:
            break
    more = (bool(src.next()) or src.cut_short) if at_limit else src.cut_short
    if resume is None and more:
        resume = (lineno, line_pos, pos)
    elif resume is not None and resume[2] == pos and not more:
        resume = None  # what was cut was the file's last newline: nothing to read on to
    return {
        "shown": newlines + (1 if line_pos else 0),
        "more": more,
        "counted_all": not more,
        "resume_line": None if resume is None else resume[0],
        "resume_byte": None if resume is None else resume[1],
    }


def _is_utf8(data: bytes) -> bool:
    if data.isascii():
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _locate(data: bytes, k: int, lineno: int, line_pos: int) -> tuple[int, int]:
    """(line, byte within the line) of ``data[k]``, given where ``data`` starts."""
    n = data.count(b"\n", 0, k)
    if not n:
        return lineno, line_pos + k
    return lineno + n, k - data.rindex(b"\n", 0, k) - 1


SEARCH_SEGMENT = 256 * 1024
"""A line longer than this is searched in segments of this many bytes, each with the
last ``SEARCH_OVERLAP`` bytes of the one before (a match longer than that, across a
segment boundary, is missed; anchors see each segment's ends)."""

SEARCH_OVERLAP = 4096

SNIFF = 8192
"""A file with a NUL byte in its first this-many bytes is binary and not searched."""


def search_lines(
    src: Source,
    regex: re.Pattern[str],
    max_chars: int,
    segment: int = SEARCH_SEGMENT,
    overlap: int = SEARCH_OVERLAP,
) -> Iterator[tuple[int, str]]:
    """``(line number, line as shown)`` for each line of ``src`` the regex matches.

    A line over ``max_chars`` characters is shown cut, with a note that says where
    its first unshown byte is (``read``'s ``offset`` / ``line_byte``).
    """
    head = src.next()
    while head and len(head) < SNIFF:
        more = src.next()
        if not more:
            break
        head += more
    if b"\0" in head[:SNIFF]:
        return
    src.unread(head)
    search = _LineSearch(regex, max_chars, segment, overlap)
    while True:
        data = src.next()
        if not data:
            yield from search.pieces(search.splitter.finish(), at_end=True)
            return
        if (last := data.rfind(b"\n")) >= 0:
            # Finish the line the last chunk left open, then match the complete lines
            # that follow together; the open end waits for the next chunk.
            first = data.index(b"\n")
            yield from search.pieces(search.splitter.feed(data[: first + 1]))
            if last > first:
                yield from search.lines(data[first + 1 : last + 1])
            data = data[last + 1 :]
        yield from search.pieces(search.splitter.feed(data))


_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def line_local(regex: re.Pattern[str]) -> bool:
    """Whether ``regex`` can never match a newline nor look past a line's ends.

    Such a pattern matches a line alone (with its newline, as ``grep`` searches it)
    exactly where its ``re.MULTILINE`` twin matches inside a block of whole lines, so
    a block can be searched in one pass. Judged conservatively from the pattern's
    text: no ``(?`` (lookarounds, inline flags), no negated class, no control
    character, and only escapes of punctuation or ``\\w``, ``\\d``, ``\\S``, ``\\b``.
    """
    pattern = regex.pattern
    if regex.flags & (re.DOTALL | re.VERBOSE) or "(?" in pattern or "[^" in pattern:
        return False
    if any(ord(c) < 0x20 for c in pattern):
        return False
    for escape in _ESCAPE.finditer(pattern):
        c = escape.group(1)
        if c not in "wdSb" and not (c.isascii() and not c.isalnum() and not c.isspace()):
            return False
    return True


class _LineSearch:
    """The state of a search between chunks: the line being read and whether it hit."""

    def __init__(self, regex: re.Pattern[str], max_chars: int, segment: int, overlap: int):
        self.regex = regex
        self.block = (
            re.compile(regex.pattern, regex.flags | re.MULTILINE) if line_local(regex) else None
        )
        self.max_chars = max_chars
        self.overlap = overlap
        self.splitter = LineSplitter(segment)
        self.lineno = 1
        self.first: bytes | None = None  # the start of the current line (enough to show)
        self.tail = b""
        self.hit = False

    def pieces(
        self, pieces: Iterator[tuple[bytes, bool]], at_end: bool = False
    ) -> Iterator[tuple[int, str]]:
        """Match a line piece by piece: a line longer than a segment is matched in
        segments, each with the end of the one before."""
        for piece, ends in pieces:
            if self.first is None:
                self.first, searched = piece[: 4 * self.max_chars + 4], piece
            else:
                searched = self.tail + piece
            if not self.hit and self.regex.search(decode(searched)):
                self.hit = True
                whole = (ends or at_end) and len(self.first) == len(piece)
                yield (
                    self.lineno,
                    _shown_line(decode(self.first), whole, self.lineno, self.max_chars),
                )
            self.tail = piece[-self.overlap :]
            if ends:
                self.lineno += 1
                self.first, self.hit = None, False

    def lines(self, block: bytes) -> Iterator[tuple[int, str]]:
        """Match complete lines (``block`` ends with a newline, the line before it
        ended): in one pass when the pattern stays inside a line (each match names its
        line, and the search goes on from the next line), else line by line."""
        text = decode(block)
        if self.block is None:
            for i, line in enumerate(text.split("\n")[:-1], start=self.lineno):
                if self.regex.search(line + "\n"):
                    yield i, _shown_line(line, True, i, self.max_chars)
            self.lineno += block.count(b"\n")
            return
        pos = counted = 0
        lineno = self.lineno
        while (found := self.block.search(text, pos)) is not None and found.start() < len(text):
            start = text.rfind("\n", 0, found.start()) + 1
            end = text.index("\n", found.start())
            lineno += text.count("\n", counted, start)
            counted = start
            yield lineno, _shown_line(text[start : end + 1], True, lineno, self.max_chars)
            pos = end + 1
        self.lineno += block.count(b"\n")


def _shown_line(text: str, whole: bool, lineno: int, max_chars: int) -> str:
    if whole:
        text = text.rstrip("\r\n")
        if len(text) <= max_chars:
            return shown(text)
    cut = text[:max_chars]
    return f"{shown(cut)} [line cut; read offset={lineno}, line_byte={raw_len(cut)} for the rest]"
