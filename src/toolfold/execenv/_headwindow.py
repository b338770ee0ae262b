"""``HeadWindow``: the first lines of a text stream, cut at a byte cap, with exact totals.

The exec host's ``read`` and ``grep`` answer with this window (and the local tools
run the same code); ``tests/remote/test_remote_fileops_props.py`` checks it is the
tools' sink window for any text and any chunking.
"""

from __future__ import annotations

from typing import Any


def _lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


class HeadWindow:
    """The first ``max_lines`` lines of a text stream, cut at ``max_bytes`` UTF-8 bytes
    (mid-line if needed, on a code point boundary), with exact totals of the stream."""

    def __init__(self, max_bytes: int, max_lines: int) -> None:
        self.max_bytes = max_bytes
        self.max_lines = max_lines
        self._parts: list[str] = []
        self._bytes = 0
        self._newlines = 0
        self.full = False
        self.total_bytes = 0
        self._total_newlines = 0
        self._last_char = ""
        self._last_line_bytes = 0
        self._first_line_bytes = 0
        self._first_line_done = False

    def write(self, text: str) -> int:
        """Add ``text`` (counted whole); return how many of its characters the window
        kept (the rest was cut, or came after the window was full)."""
        if not text:
            return 0
        size = len(text.encode("utf-8", "surrogatepass"))
        self.total_bytes += size
        self._total_newlines += text.count("\n")
        self._last_char = text[-1]
        if not self._first_line_done:
            head, newline, _ = text.partition("\n")
            self._first_line_bytes += len(head.encode("utf-8", "surrogatepass"))
            self._first_line_done = bool(newline)
        tail = text.rpartition("\n")
        if tail[1]:
            self._last_line_bytes = len(tail[2].encode("utf-8", "surrogatepass"))
        else:
            self._last_line_bytes += size
        if self.full:
            return 0
        # Take whole lines while they fit, then cut the first one that does not.
        need_lines = self.max_lines - self._newlines
        cut = len(text)
        if text.count("\n") >= need_lines:
            pos = -1
            for _ in range(need_lines):
                pos = text.index("\n", pos + 1)
            cut = pos + 1
        piece = text[:cut]
        piece_bytes = size if cut == len(text) else len(piece.encode("utf-8", "surrogatepass"))
        if self._bytes + piece_bytes > self.max_bytes:
            room = self.max_bytes - self._bytes
            piece = piece.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
            piece_bytes = len(piece.encode("utf-8", "surrogatepass"))
            self.full = True
        self._parts.append(piece)
        self._bytes += piece_bytes
        self._newlines += piece.count("\n")
        if cut < len(text):  # max_lines reached inside this text
            self.full = True
        return len(piece)

    def tally(self, data: bytes, newlines: int) -> None:
        """Count ``data`` (valid UTF-8 holding ``newlines`` newlines) as ``write`` would
        count its text once the window is full, without decoding it: a reader counting
        the rest of a big file spends its time reading, not converting."""
        if not self.full:
            raise ValueError("tally() counts what comes after a full window; write() until then")
        if not data:
            return
        self.total_bytes += len(data)
        self._total_newlines += newlines
        self._last_char = "\n" if data[-1] == 0x0A else "."
        if not self._first_line_done:
            first = data.find(b"\n")
            self._first_line_bytes += len(data) if first < 0 else first
            self._first_line_done = first >= 0
        last = data.rfind(b"\n")
        if last >= 0:
            self._last_line_bytes = len(data) - last - 1
        else:
            self._last_line_bytes += len(data)

    def result(self) -> dict[str, Any]:
        text = "".join(self._parts)
        total_lines = self._total_newlines + (
            1 if self.total_bytes and self._last_char != "\n" else 0
        )
        truncated = self.total_bytes > self._bytes
        by_lines = self._newlines >= self.max_lines
        return {
            "text": text,
            "truncated": truncated,
            "truncated_by": ("lines" if by_lines else "bytes") if truncated else None,
            "first_line_exceeds_limit": self._first_line_bytes > self.max_bytes,
            "max_bytes": self.max_bytes,
            "max_lines": self.max_lines,
            "output_lines": _lines(text),
            "output_bytes": self._bytes,
            "total_lines": total_lines,
            "total_bytes": self.total_bytes,
            "last_line_bytes": self._last_line_bytes,
        }
