"""A call's spill file, served to the browser: opened safely, paged by bytes or lines.

A spill file can be gigabytes, so nothing here reads one whole: a byte page is one
``pread``; a line page jumps through a sparse line index (``LineIndex``) that is built
once per file, as far as it has been asked for, and cached with a bound on its size.

Only the store's own spill files are reachable. The path comes from the stored call,
never from the request, and must name a regular file of this user directly inside
the session's spill directory; every component below that directory is opened with
``O_NOFOLLOW`` relative to the one above it, so a symlink anywhere (in the file name
or swapped in for the directory) is refused, and the file's identity is checked
after it is open.
"""

from __future__ import annotations

import bisect
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "MAX_PAGE_BYTES",
    "MAX_PAGE_LINES",
    "LineIndex",
    "SpillDirs",
    "SpillFile",
    "SpillRefusedError",
    "find_line",
    "open_spill",
    "read_lines",
]

SpillDirs = Callable[[str], Path]
"""``spill_dirs(session)``: the directory holding that session's spill files."""

MAX_PAGE_BYTES = 1024 * 1024
"""Most bytes one page answer carries (a byte page, or the lines of a line page)."""

MAX_PAGE_LINES = 5000
"""Most lines one line page answer carries."""

CHUNK = 64 * 1024
"""Read size, and the default distance between two checkpoints of a line index."""

MAX_CHECKPOINTS = 1 << 16
"""Most checkpoints one file's index keeps: past it the index thins itself out (every
other checkpoint goes, the spacing doubles), so a 1 GB file costs at most ~1 MB of
index and a line is found by reading at most two spacings of the file."""

MAX_INDEXED_FILES = 32
"""Files whose index is kept (least recently used goes first)."""


class SpillRefusedError(Exception):
    """The spill file cannot be served: ``status`` and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class SpillFile:
    """An open spill file (close it): its descriptor, size and identity."""

    fd: int
    size: int
    key: tuple[int, int]

    def close(self) -> None:
        os.close(self.fd)

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, max(0, min(length, self.size - offset)), offset)

    def chunks(self, chunk: int = CHUNK) -> Iterator[bytes]:
        """The whole file, ``chunk`` bytes at a time (a download)."""
        offset = 0
        while offset < self.size:
            data = os.pread(self.fd, min(chunk, self.size - offset), offset)
            if not data:
                return
            offset += len(data)
            yield data


def open_spill(directory: Path, path: str) -> SpillFile:
    """Open ``path`` for reading if it is a regular file of this user directly inside
    ``directory`` (reached through no symlink below it); else ``SpillRefusedError``."""
    base = os.path.abspath(directory)
    given = os.path.abspath(path)
    if os.path.dirname(given) != base or not os.path.basename(given):
        raise SpillRefusedError(
            403,
            "the call's spill file is not inside this session's spill directory "
            f"{base}; only the store's own spill files are served",
        )
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        dir_fd = os.open(base, flags | os.O_DIRECTORY)
    except FileNotFoundError as exc:
        raise SpillRefusedError(404, f"spill directory {base} does not exist") from exc
    except OSError as exc:
        raise SpillRefusedError(
            403, f"spill directory {base} cannot be opened safely ({exc.strerror}); a symlink?"
        ) from exc
    try:
        info = os.fstat(dir_fd)
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise SpillRefusedError(
                403, f"spill directory {base} is not private to this user; not served"
            )
        try:
            fd = os.open(os.path.basename(given), flags | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError as exc:
            raise SpillRefusedError(
                404, f"spill file {given} is gone (removed or cleaned up)"
            ) from exc
        except OSError as exc:
            raise SpillRefusedError(
                403, f"spill file {given} cannot be opened safely ({exc.strerror}); a symlink?"
            ) from exc
    finally:
        os.close(dir_fd)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        os.close(fd)
        raise SpillRefusedError(
            403, f"spill file {given} is not a regular file of this user; not served"
        )
    return SpillFile(fd, st.st_size, (st.st_dev, st.st_ino))


@dataclass
class _Index:
    """Checkpoints of one file: ``lines[i]`` newlines lie before byte ``offsets[i]``."""

    offsets: list[int] = field(default_factory=lambda: [0])
    lines: list[int] = field(default_factory=lambda: [0])
    spacing: int = field(default_factory=lambda: CHUNK)
    scanned: int = 0
    """Bytes counted so far (the index covers ``[0, scanned)``)."""
    newlines: int = 0
    """Newlines in ``[0, scanned)``."""
    lock: threading.Lock = field(default_factory=threading.Lock)


class LineIndex:
    """Finds the byte offset of a line of a spill file without reading the file each time.

    Per file (by device and inode) it keeps sparse checkpoints, built forward only as
    far as a request needed and extended when the file has grown (a running call's
    spill). Memory is bounded: ``MAX_CHECKPOINTS`` per file, ``MAX_INDEXED_FILES``
    files. Thread-safe (routes call it from a worker thread).
    """

    def __init__(self) -> None:
        self._files: OrderedDict[tuple[int, int], _Index] = OrderedDict()
        self._lock = threading.Lock()

    def _index(self, file: SpillFile) -> _Index:
        with self._lock:
            index = self._files.get(file.key)
            if index is None or index.scanned > file.size:
                # New, or the file was truncated/replaced in place: start over.
                index = self._files[file.key] = _Index()
            self._files.move_to_end(file.key)
            while len(self._files) > MAX_INDEXED_FILES:
                self._files.popitem(last=False)
            return index

    def line_offset(self, file: SpillFile, line: int) -> tuple[int, int | None]:
        """``(offset, total)``: where 1-based ``line`` starts (``file.size`` when the
        file has fewer lines) and the file's line count when the scan reached its end
        (else ``None``)."""
        index = self._index(file)
        want = line - 1  # newlines before the line's start
        with index.lock:
            while index.newlines < want and index.scanned < file.size:
                self._extend(file, index)
            total = None
            if index.scanned >= file.size:
                total = index.newlines + (1 if file.size and not _ends_in_newline(file) else 0)
            if want <= 0:
                return 0, total
            if index.newlines < want:
                return file.size, total
            # The last checkpoint with fewer newlines before it than wanted: the line
            # starts after it, within the scanned part.
            i = bisect.bisect_left(index.lines, want) - 1
            offset, seen = index.offsets[i], index.lines[i]
        while True:
            data = file.read(offset, CHUNK)
            if not data:
                return file.size, total
            count = data.count(b"\n")
            if seen + count < want:
                seen += count
                offset += len(data)
                continue
            pos = -1
            for _ in range(want - seen):
                pos = data.index(b"\n", pos + 1)
            return offset + pos + 1, total

    def _extend(self, file: SpillFile, index: _Index) -> None:
        data = file.read(index.scanned, CHUNK)
        if not data:
            index.scanned = file.size
            return
        index.scanned += len(data)
        index.newlines += data.count(b"\n")
        if index.scanned - index.offsets[-1] >= index.spacing:
            index.offsets.append(index.scanned)
            index.lines.append(index.newlines)
            if len(index.offsets) > MAX_CHECKPOINTS:
                index.offsets = index.offsets[::2]
                index.lines = index.lines[::2]
                index.spacing *= 2

    def stats(self) -> dict[str, int]:
        """How many files are indexed and their checkpoints (for tests and benchmarks)."""
        with self._lock:
            return {
                "files": len(self._files),
                "checkpoints": sum(len(i.offsets) for i in self._files.values()),
            }


def _ends_in_newline(file: SpillFile) -> bool:
    return file.read(file.size - 1, 1) == b"\n"


def read_lines(file: SpillFile, start: int, count: int) -> tuple[list[str], int, bool]:
    """Up to ``count`` lines from byte ``start``: ``(lines, next_offset, cut)``, where
    ``cut`` says one line was longer than a page's byte budget (its start is shown and
    the next page goes on inside it). Invalid UTF-8 shows as U+FFFD."""
    # Read as far as the lines need (64 KiB at a time), not a whole budget up front.
    data = b""
    while len(data) < MAX_PAGE_BYTES:
        more = file.read(start + len(data), min(CHUNK, MAX_PAGE_BYTES - len(data)))
        if not more:
            break
        data += more
        if data.count(b"\n") >= count:
            break
    if not data:
        return [], start, False
    parts = data.split(b"\n")
    at_end = start + len(data) >= file.size
    # The last part is a line only at the end of the file (a last line with no newline).
    complete = parts if at_end and not data.endswith(b"\n") else parts[:-1]
    lines = complete[:count]
    cut = False
    if not lines and data:
        lines, cut = [data], True
    consumed = min(sum(len(x) + 1 for x in lines), len(data))
    return [x.decode("utf-8", "replace") for x in lines], start + consumed, cut


def find_line(
    file: SpillFile, start: int, line: int, needle: bytes, budget: int
) -> tuple[int | None, int | None]:
    """Scan ``file`` forward from byte ``start`` (where 1-based ``line`` begins) for
    ``needle``: ``(match, stop)``. ``match`` is the line the first match starts on;
    ``stop`` (when ``match`` is ``None``) is the line where ``budget`` bytes of scanning
    ran out, to go on from (``None``: the end of the file was reached).

    At most one chunk plus the needle's length is held: each chunk keeps the last
    ``len(needle) - 1`` bytes of the one before, so a match across two chunks is found."""
    keep = len(needle) - 1
    buf = b""
    pos = start  # file offset of buf[0]
    scanned = 0
    while True:
        if scanned >= budget:
            return None, line + buf.count(b"\n")
        data = file.read(pos + len(buf), min(CHUNK, budget - scanned))
        if not data:
            return None, None
        scanned += len(data)
        buf += data
        at = buf.find(needle)
        if at >= 0:
            return line + buf.count(b"\n", 0, at), None
        drop = max(0, len(buf) - keep)
        line += buf.count(b"\n", 0, drop)
        pos += drop
        buf = buf[drop:]
