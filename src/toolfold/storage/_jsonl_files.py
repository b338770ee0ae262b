"""The JSONL backend's files: framing, parsing and loading a session's main log and side files.

Everything here works on bytes and paths, below the session: ``_jsonl_session`` appends
and reads through it, ``_jsonl`` (the repository) creates, locks, lists and deletes with
it. The layout and the rules are in ``_jsonl``'s module doc and docs/storage.md.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolfold import _json
from toolfold._fsperm import PRIVATE_FILE

from ._addresses import EphemeralScope, Scope, encode_scope_id
from ._errors import (
    CorruptStoreError,
    StorageError,
)
from ._jsonl_records import AddressTable, decode_line
from ._writes import (
    JSON,
    Write,
)

try:  # advisory lock: one writer per session file across processes (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

FORMAT_VERSION = 2
"""Version 2 frames every record line with a CRC-32 (see :func:`_frame`). Version 1
files (no checksums) are still read, and appended to in their own format."""
READABLE_VERSIONS = (1, 2)
MAIN_SUFFIX = ".jsonl"
SIDE_DIR_SUFFIX = ".jsonl.scopes"
SIDE_PREFIX = "scope-"
SIDE_SUFFIX = ".scope"
TMP_SUFFIX = ".tmp"


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(TMP_SUFFIX)


def _sync_dir(path: Path) -> None:
    # A rename/link/create is durable only once its directory entry is: fsync the dir.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_datasync = getattr(os, "fdatasync", os.fsync)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _unlink(file: _File) -> bool:
    """Close and unlink a retired side file; False if it is still there."""
    file.close()
    try:
        os.unlink(file.path)
    except FileNotFoundError:
        pass
    except OSError:
        return False
    return True


# -- files ---------------------------------------------------------------------------------


@dataclass(eq=False)
class _File:
    """One append-only file we write: its path, open descriptor, size and address table."""

    path: Path
    scope_id: str | None = None  # None for the main log
    size: int = 0
    exists: bool = False
    fd: int | None = None
    table: AddressTable = field(default_factory=AddressTable)
    #: The file's format version: lines appended to a version 1 file carry no checksum.
    version: int = FORMAT_VERSION
    #: Set when a failed write could not be taken back: appending more would bury a
    #: torn line inside the file, so the file refuses writes until the session reopens.
    broken: str | None = None
    #: What a reader read so far: complete lines, and the file's inode (a side file
    #: made again for a new lifetime of its scope is a new file).
    lines: int = 0
    ino: int = 0
    last_seq: int = 0

    def close(self) -> None:
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with contextlib.suppress(OSError):
                os.close(fd)


@dataclass
class _Parsed:
    """One file read from disk: header, complete records (seq-ascending), torn tail."""

    path: Path
    header: dict[str, Any]
    records: list[tuple[int, Write, JSON, int]]  # seq, write, payload, line number
    table: AddressTable
    good_size: int  # bytes up to the end of the last complete line
    total_size: int
    version: int = FORMAT_VERSION
    lines: int = 0  # lines read up to good_size (for messages about later lines)
    ino: int = 0

    @property
    def torn(self) -> bool:
        """Whether the file ends in an incomplete record (a write that never finished)."""
        return self.good_size < self.total_size

    def torn_note(self, *, repaired: bool) -> str:
        what = (
            "dropped (the file was cut back to the last complete record)"
            if repaired
            else ("ignored; the next writer drops it")
        )
        return (
            f"{self.path}: the last record, {self.total_size - self.good_size} bytes at byte "
            f"{self.good_size}, is incomplete (a write that never finished, so its commit "
            f"never returned): {what}"
        )


# A version 2 record line is the transaction's JSON array with the CRC-32 of the rest of
# the line (the bytes after the checksum's comma, without the newline) as its first
# element: ["1a2b3c4d",[...],[...]]. The line stays one JSON array, so grep and jq still
# read it; the fixed-width prefix lets the reader check it before parsing.
_CRC_PREFIX = b'["'
_CRC_LEN = len(_CRC_PREFIX) + 8 + 2


def _frame(line: bytes) -> bytes:
    """Add the checksum to an encoded line (``[...]\n`` from ``encode_line``)."""
    body = line[1:-1]
    return b'["%08x",' % zlib.crc32(body) + body + b"\n"


def _checked(raw: bytes) -> bool:
    """Whether a version 2 line (without its newline) carries a matching checksum."""
    if len(raw) <= _CRC_LEN or not raw.startswith(_CRC_PREFIX) or raw[10:12] != b'",':
        return False
    try:
        expected = int(raw[2:10], 16)
    except ValueError:
        return False
    return zlib.crc32(raw[_CRC_LEN:]) == expected


def _iter_lines(data: bytes) -> Iterator[tuple[int, int, bytes, bool]]:
    """Yield ``(lineno, end_offset, line, has_newline)`` for each line of ``data``."""
    pos, lineno, n = 0, 0, len(data)
    while pos < n:
        lineno += 1
        nl = data.find(b"\n", pos)
        if nl == -1:
            yield lineno, n, data[pos:], False
            return
        yield lineno, nl + 1, data[pos:nl], True
        pos = nl + 1


def _parse_file(path: Path, data: bytes, scope: Scope, header_kind: str) -> _Parsed:
    where = str(path)
    lines = _iter_lines(data)
    first = next(lines, None)
    header: object = None
    if first is not None and first[3]:
        with contextlib.suppress(_json.DecodeError):
            header = _json.loads(first[2])
    if first is None or not isinstance(header, dict) or header.get("kind") != header_kind:
        raise CorruptStoreError(
            f"{where}: line 1 is not a {header_kind} line (got {data[:80]!r}); this is not a "
            "toolfold JSONL file or its start was damaged — move it away",
            path=where,
            record=1,
            offset=0,
        )
    version = header.get("v")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise CorruptStoreError(
            f"{where}: format version {version!r} is not supported (this toolfold "
            f"reads versions {', '.join(map(str, READABLE_VERSIONS))}); open it with the "
            "toolfold that wrote it",
            path=where,
            record=1,
            offset=0,
        )
    table = AddressTable()
    records, good, read = _parse_records(
        where, lines, table, scope, checksummed=version >= 2, good=first[1], n=len(data)
    )
    return _Parsed(path, header, records, table, good, len(data), version, max(read, 1))


def _parse_records(
    where: str,
    lines: Iterator[tuple[int, int, bytes, bool]],
    table: AddressTable,
    scope: Scope,
    *,
    checksummed: bool,
    good: int,
    n: int,
    base: int = 0,
    line_base: int = 0,
    last_seq: int = 0,
) -> tuple[list[tuple[int, Write, JSON, int]], int, int]:
    """Decode the record lines of a file: ``lines`` from :func:`_iter_lines` over the
    ``n`` bytes read from file offset ``base`` (line numbers and offsets in messages
    count from there). Returns the complete records, the offset (in the bytes read)
    just past the last complete line, and the number of the last line read."""
    records: list[tuple[int, Write, JSON, int]] = []
    complete = line_base
    for rel, end, raw, has_nl in lines:
        lineno = line_base + rel
        start = base + good
        is_last = end >= n
        if not has_nl:
            break  # torn: the write of this line never completed
        if checksummed and not _checked(raw):
            if is_last and b"\x00" in raw:
                # A partly persisted write: the file system kept the line's end but not
                # all of its blocks (they read back as zeros). JSON text never holds NUL.
                break
            raise CorruptStoreError(
                f"{where}: the record at byte {start} (line {lineno}) fails its checksum: "
                "a committed record was changed on disk (bit rot, or an edit); restore the "
                "file from a backup — other sessions are not affected",
                path=where,
                record=lineno,
                offset=start,
            )
        try:
            parsed = _json.loads(raw)
        except _json.DecodeError as exc:
            if is_last and not checksummed:
                break  # torn (e.g. a partly persisted write): drop it
            raise CorruptStoreError(
                f"{where}: line {lineno} (byte {start}) is not valid JSON ({exc}) and is not "
                "an interrupted write, so it is damage; restore the file or cut the "
                "line out by hand",
                path=where,
                record=lineno,
                offset=start,
            ) from exc
        if checksummed:
            parsed = parsed[1:]
        for seq, w, payload in decode_line(table, parsed, scope, path=where, lineno=lineno):
            if seq <= last_seq:
                raise CorruptStoreError(
                    f"{where}: line {lineno} has seq {seq} after seq {last_seq}; seqs in a "
                    "file must increase — the file was edited or spliced",
                    path=where,
                    record=lineno,
                    offset=start,
                )
            last_seq = seq
            records.append((seq, w, payload, lineno))
        good, complete = end, lineno
    return records, good, complete


def _read_file(parsed: _Parsed, scope_id: str | None, fd: int | None = None) -> _File:
    return _File(
        parsed.path,
        scope_id,
        parsed.good_size,
        True,
        fd,
        parsed.table,
        parsed.version,
        lines=parsed.lines,
        ino=parsed.ino,
        last_seq=parsed.records[-1][0] if parsed.records else 0,
    )


def _side_name(scope: EphemeralScope) -> str:
    return f"{SIDE_PREFIX}{encode_scope_id(scope.id)}{SIDE_SUFFIX}"


def _lock(fd: int, path: Path) -> None:
    if fcntl is None:  # pragma: no cover - non-POSIX
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise StorageError(
            f"{path} is open in another repository object or process; JSONL sessions have "
            "one writer — close it there first"
        ) from None


def _read_more(file: _File, f: Any, scope: Scope) -> list[tuple[int, Write, JSON]]:
    """The complete records appended to ``file`` (open as ``f``) since a reader last
    read it; a record still being written stays unread until it is complete."""
    size = os.fstat(f.fileno()).st_size
    if size <= file.size:
        return []
    f.seek(file.size)
    data = f.read(size - file.size)
    records, good, lines = _parse_records(
        str(file.path),
        _iter_lines(data),
        file.table,
        scope,
        checksummed=file.version >= 2,
        good=0,
        n=len(data),
        base=file.size,
        line_base=file.lines,
    )
    file.size += good
    file.lines = lines
    if records:
        file.last_seq = records[-1][0]
    return [(seq, w, payload) for seq, w, payload, _ in records]


def _last_seq(path: Path) -> int:
    """The highest seq in a file: that of its last complete line (seqs increase down a
    file), read from the end, so the cost is one line whatever the file's size. A line
    still being written is not complete and does not count. 0 for no record."""
    with open(path, "rb") as f:
        pos = os.fstat(f.fileno()).st_size
        buf, step = b"", 4096
        while pos > 0:
            start = max(0, pos - step)
            f.seek(start)
            buf = f.read(pos - start) + buf
            pos, step = start, step * 2
            end = buf.rfind(b"\n")
            if end == -1:
                continue
            begin = buf.rfind(b"\n", 0, end)
            if begin != -1 or pos == 0:
                return _line_seq(buf[begin + 1 : end])
    return 0


def _line_seq(raw: bytes) -> int:
    """The last seq of one record line (see ``_jsonl_records``), 0 for a header or a
    line that does not parse (a partly persisted write after a crash)."""
    try:
        line = _json.loads(raw)
    except _json.DecodeError:
        return 0
    if not isinstance(line, list):
        return 0
    high = 0
    for record in line:
        if not isinstance(record, list) or not record or record[0] == "@":
            continue  # a checksum, or an address definition
        seq = record[1] if record[0] == "e" else record[2] if len(record) > 2 else 0
        if isinstance(seq, int) and not isinstance(seq, bool):
            high = max(high, seq)
    return high


def _atomic_create(path: Path, content: bytes, sync: bool, *, exclusive: bool) -> None:
    """Create ``path`` holding ``content`` all at once (temp file + rename, or + link
    when ``exclusive``: then an existing file raises FileExistsError)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}{TMP_SUFFIX}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, PRIVATE_FILE)
        try:
            os.fchmod(fd, PRIVATE_FILE)  # it holds commands and output; whatever the umask
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if exclusive:
            os.link(tmp, path)
        else:
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    if sync:
        _sync_dir(path.parent)
