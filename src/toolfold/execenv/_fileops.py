"""File operations an exec host answers for the remote ``read`` and ``grep`` tools.

Each takes JSON-ready arguments and returns a JSON-ready dict whose text is already
bounded (the first ``max_lines`` lines, cut at ``max_bytes`` UTF-8 bytes — the same
head window the tools' output sink applies), with exact totals. They run in a worker
thread of the exec host and check ``cancel`` between blocks, so a huge file or tree
never holds more than one window in memory and a cancelled call stops promptly.

``iter_files`` and ``search_file`` are also what the local ``grep`` tool walks with, so
local and remote searches skip and cut the same things.
"""

from __future__ import annotations

import base64
import codecs
import fnmatch
import os
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

SEARCH_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache"}
)
"""Directories never searched (version control, dependencies, caches)."""

SEARCH_MAX_LINE_CHARS = 500
"""A matching line longer than this is shown cut (minified files would drown the output)."""

_SNIFF = 8192
_COUNT_BLOCK_BYTES = 1024 * 1024


class FileOpError(Exception):
    """A file operation's arguments are unusable; the message names the bad one."""


def iter_files(root: Path, glob: str | None) -> Iterator[Path]:
    """Files under ``root`` (or ``root`` itself), sorted, skipping ``SEARCH_SKIP_DIRS`` and dot dirs."""
    if root.is_file():
        yield root
        return
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d for d in dirnames if d not in SEARCH_SKIP_DIRS and not d.startswith(".")
        )
        for name in sorted(filenames):
            if glob is None or fnmatch.fnmatch(name, glob):
                yield Path(dirpath) / name


def search_file(path: Path, regex: re.Pattern[str]) -> list[tuple[int, str]]:
    """(line number, line) for every matching line; [] for binary or unreadable files."""
    try:
        with path.open("rb") as f:
            if b"\0" in f.read(_SNIFF):
                return []
        hits: list[tuple[int, str]] = []
        with path.open("r", encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, start=1):
                if regex.search(line):
                    line = line.rstrip("\r\n")
                    if len(line) > SEARCH_MAX_LINE_CHARS:
                        line = line[:SEARCH_MAX_LINE_CHARS] + " [line cut]"
                    hits.append((lineno, line))
        return hits
    except OSError:
        return []


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

    def write(self, text: str) -> None:
        if not text:
            return
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
            return
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


def _resolve(args: dict[str, Any]) -> Path:
    path = args.get("path")
    cwd = args.get("cwd")
    if not isinstance(path, str) or not path:
        raise FileOpError(f"'path' must be a non-empty string, got {path!r}")
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = Path(cwd).expanduser() / p if isinstance(cwd, str) and cwd else Path.cwd() / p
    return p


def _positive(args: dict[str, Any], name: str, default: int | None = None) -> int:
    value = args.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FileOpError(f"'{name}' must be a positive integer, got {value!r}")
    return value


def stat(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """``{path, exists, is_dir, size}`` of ``path`` (resolved against ``cwd``)."""
    p = _resolve(args)
    try:
        st = p.stat()
    except OSError:
        return {"path": str(p), "exists": False, "is_dir": False, "size": 0}
    return {"path": str(p), "exists": True, "is_dir": p.is_dir(), "size": st.st_size}


def read_bytes(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """The whole file as base64, refused (``too_big``) when over ``max_bytes``."""
    p = _resolve(args)
    limit = _positive(args, "max_bytes")
    with p.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        return {"path": str(p), "too_big": True, "size": p.stat().st_size}
    return {
        "path": str(p),
        "too_big": False,
        "size": len(data),
        "data": base64.b64encode(data).decode(),
    }


def read_lines(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """Lines ``start``.. (at most ``limit``) of a text file, head-windowed.

    Lines split on ``\\n`` only. Returns the window's fields plus ``shown`` (lines
    read from ``start``) and ``more`` (lines remain past ``limit``).
    """
    p = _resolve(args)
    start = _positive(args, "start", 1)
    limit = args.get("limit")
    if limit is not None:
        limit = _positive(args, "limit")
    window = HeadWindow(_positive(args, "max_bytes"), _positive(args, "max_lines"))
    shown = 0
    more = False
    with p.open("rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if lineno < start:
                continue
            if limit is not None and shown >= limit:
                more = True
                break
            window.write(raw.decode("utf-8", "replace"))
            shown += 1
            if shown % 4096 == 0 and cancel.is_set():
                break
            if limit is None and window.full:
                # Window full: count the rest exactly, a megabyte at a time.
                decoder = codecs.getincrementaldecoder("utf-8")("replace")
                while chunk := f.read(_COUNT_BLOCK_BYTES):
                    shown += chunk.count(b"\n")
                    window.write(decoder.decode(chunk))
                    if cancel.is_set():
                        break
                window.write(decoder.decode(b"", final=True))
                break
    return {"path": str(p), "shown": shown, "more": more, **window.result()}


def grep(args: dict[str, Any], cancel: threading.Event) -> dict[str, Any]:
    """``path:line:text`` for every matching line under ``path``, head-windowed, with
    the number of matches, files with matches and files searched."""
    pattern = args.get("pattern")
    if not isinstance(pattern, str):
        raise FileOpError(f"'pattern' must be a string, got {pattern!r}")
    try:
        regex = re.compile(
            re.escape(pattern) if args.get("literal") else pattern,
            re.IGNORECASE if args.get("ignore_case") else 0,
        )
    except re.error as exc:
        raise FileOpError(f"invalid regular expression {pattern!r}: {exc}") from exc
    glob = args.get("glob")
    root = _resolve(args)
    if not root.exists():
        return {"path": str(root), "missing": True}
    window = HeadWindow(_positive(args, "max_bytes"), _positive(args, "max_lines"))
    base = root if root.is_dir() else root.parent
    matches = found = searched = 0
    for path in iter_files(root, glob if isinstance(glob, str) else None):
        if cancel.is_set():
            break
        searched += 1
        hits = search_file(path, regex)
        if not hits:
            continue
        found += 1
        matches += len(hits)
        shown = os.path.relpath(path, base) if root.is_dir() else path.name
        window.write("".join(f"{shown}:{n}:{line}\n" for n, line in hits))
    return {
        "path": str(root),
        "missing": False,
        "matches": matches,
        "files": found,
        "searched": searched,
        **window.result(),
    }


FILE_OPS: dict[str, Callable[[dict[str, Any], threading.Event], dict[str, Any]]] = {
    "stat": stat,
    "read_bytes": read_bytes,
    "read_lines": read_lines,
    "grep": grep,
}
"""What a ``call`` request may name."""
