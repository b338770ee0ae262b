"""The JSONL backend: one append-only main log per session plus one side file per live scope.

Layout of a repository directory::

    <dir>/<name>.jsonl                              main log: session scope, retirements
    <dir>/<name>.jsonl.scopes/scope-<enc id>.scope  one per ephemeral scope lifetime
    <dir>/.<...>.tmp, <dir>/<name>.jsonl.scopes/.<...>.tmp   temp files (ignored)

Every file starts with a header line and then holds one line per transaction (see
``_jsonl_records`` for the record encoding). The rules, and why they exist, are in
docs/storage.md ("JSONL backend").
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import os
import secrets
import shutil
import time
import urllib.parse
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from toolfold._fsperm import PRIVATE_DIR, PRIVATE_FILE, make_private_dirs

from ._addresses import SESSION, EphemeralScope, ListAddress, Scope, ValueAddress, encode_scope_id
from ._base import (
    Entry,
    EntryIndex,
    FsyncPolicy,
    ListElement,
    Order,
    Repository,
    Session,
    StoredElement,
    check_session_name,
    load_stored,
    page_sorted,
)
from ._changes import CHANGE_POLL_INTERVAL, ChangeWaiters
from ._errors import (
    BackendError,
    CorruptStoreError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from ._jsonl_records import AddressTable, decode_line, encode_line, undo
from ._writes import (
    JSON,
    AppendEntry,
    AppendList,
    DeleteList,
    DeleteValue,
    RetireScope,
    SetValue,
    Write,
)

try:  # advisory lock: one writer per session file across processes (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["JsonlRepository", "JsonlSession"]

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


# -- in-memory index ---------------------------------------------------------------------


class _ScopeData:
    __slots__ = ("lists", "values")

    def __init__(self) -> None:
        self.values: dict[str, dict[str, bytes]] = {}
        self.lists: dict[tuple[str, str], list[StoredElement]] = {}


class _Index:
    """What a session holds, so reads never rescan a file. Values are kept as encoded
    JSON (what the line carried): a caller can never mutate the store through a read."""

    def __init__(self) -> None:
        self.scopes: dict[Scope, _ScopeData] = {}
        self.entries = EntryIndex()

    def apply(self, w: Write, seq: int, data: bytes | None) -> None:
        if isinstance(w, AppendEntry):
            self.entries.append(seq, _payload(data), w.key, orjson.dumps(w.summary))
        elif isinstance(w, RetireScope):
            self.scopes.pop(w.scope, None)
        else:
            a = w.address
            sd = self.scopes.get(a.scope)
            if isinstance(w, SetValue | AppendList):
                if sd is None:
                    sd = self.scopes[a.scope] = _ScopeData()
                if isinstance(w, SetValue):
                    sd.values.setdefault(a.namespace, {})[a.key] = _payload(data)
                else:
                    sd.lists.setdefault((a.namespace, a.key), []).append(
                        StoredElement(seq, _payload(data), w.tag)
                    )
            elif sd is not None:
                if isinstance(w, DeleteValue):
                    ns = sd.values.get(a.namespace)
                    if ns is not None:
                        ns.pop(a.key, None)
                        if not ns:
                            del sd.values[a.namespace]
                else:
                    sd.lists.pop((a.namespace, a.key), None)
                if not sd.values and not sd.lists:
                    del self.scopes[a.scope]


def _payload(data: bytes | None) -> bytes:
    # Only deletes and retirements come without a payload, and they never store one.
    return b"null" if data is None else data


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
        with contextlib.suppress(orjson.JSONDecodeError):
            header = orjson.loads(first[2])
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
            parsed = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
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


@dataclass
class _Loaded:
    session_id: str
    main: _File
    sides: dict[EphemeralScope, _File]
    index: _Index
    next_seq: int
    notes: tuple[str, ...] = ()
    #: Each retired scope id's latest retirement seq (its side records below are dead).
    retired: dict[str, int] = field(default_factory=dict)


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


def _load_session(directory: Path, name: str, main_fd: int | None) -> _Loaded:
    """Read a session from disk (main log, then side files), check it, rebuild the
    index, then — only once everything checked out, and only for a writer (``main_fd``
    is its locked descriptor) — repair: truncate torn tails, unlink side files that hold
    nothing live, remove stale temp files. A reader (``main_fd`` None) changes nothing:
    a torn tail is skipped in memory and a side file that vanished meanwhile (its scope
    was retired by the writer) is skipped."""
    repair = main_fd is not None
    main_path = directory / f"{name}{MAIN_SUFFIX}"
    with open(main_path, "rb") as f:
        main = _parse_file(main_path, f.read(), SESSION, "session_header")
        main.ino = os.fstat(f.fileno()).st_ino
    session_id = main.header.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise CorruptStoreError(
            f"{main_path}: header has no sessionId; the file was edited — restore it",
            path=str(main_path),
            record=1,
        )
    retired: dict[str, int] = {}
    for seq, w, _, _ in main.records:
        if isinstance(w, RetireScope):
            retired[w.scope.id] = seq  # seqs increase: the last one is the latest

    side_dir = directory / f"{name}{SIDE_DIR_SUFFIX}"
    sides: list[tuple[EphemeralScope, _Parsed]] = []
    temps: list[Path] = []
    if side_dir.is_dir():
        for entry in sorted(os.scandir(side_dir), key=lambda e: e.name):
            if _is_temp(entry.name):
                temps.append(Path(entry.path))
                continue
            if not (entry.name.startswith(SIDE_PREFIX) and entry.name.endswith(SIDE_SUFFIX)):
                continue  # not ours (a note, an editor backup): leave it alone
            path = Path(entry.path)
            scope = _side_scope(path, entry.name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
                    ino = os.fstat(f.fileno()).st_ino
            except FileNotFoundError:
                if repair:
                    raise
                continue  # retired and unlinked by the writer while we were reading
            parsed = _parse_file(path, data, scope, "scope_header")
            parsed.ino = ino
            _check_side_header(parsed, scope, session_id)
            sides.append((scope, parsed))

    # Every complete record counts for the high-water mark and the duplicate check,
    # dead ones included: a seq that reached a disk is never handed out again.
    streams = [[(r[0], 0, r[3], r) for r in main.records]]
    streams += [[(r[0], i + 1, r[3], r) for r in p.records] for i, (_, p) in enumerate(sides)]
    paths = [main.path] + [p.path for _, p in sides]
    index = _Index()
    high = 0
    prev: tuple[int, int, int] | None = None
    for seq, file_no, lineno, (_, w, payload, _) in heapq.merge(*streams):
        if prev is not None and prev[0] == seq:
            raise CorruptStoreError(
                f"seq {seq} appears twice: {paths[prev[1]]} line {prev[2]} and "
                f"{paths[file_no]} line {lineno}; one of the files does not belong here",
                path=str(paths[file_no]),
                record=lineno,
            )
        prev = (seq, file_no, lineno)
        high = seq
        if file_no > 0:
            scope = sides[file_no - 1][0]
            if seq < retired.get(scope.id, 0):
                continue  # dead: an earlier lifetime of the scope, retired
        index.apply(w, seq, None if _no_payload(w) else orjson.dumps(payload))

    notes = tuple(p.torn_note(repaired=repair) for p in [main, *(p for _, p in sides)] if p.torn)
    main_file = _read_file(main, None, main_fd)
    side_files: dict[EphemeralScope, _File] = {}
    if not repair:
        for scope, parsed in sides:
            side_files[scope] = _read_file(parsed, scope.id)
        return _Loaded(session_id, main_file, side_files, index, high + 1, notes, retired)

    # Checks are over; from here on we only repair.
    if main.torn and main_fd is not None:
        os.ftruncate(main_fd, main.good_size)
    for scope, parsed in sides:
        dead_before = retired.get(scope.id, 0)
        if all(seq < dead_before for seq, *_ in parsed.records):
            with contextlib.suppress(OSError):  # retried at the next open
                os.unlink(parsed.path)
            continue
        if parsed.torn:
            os.truncate(parsed.path, parsed.good_size)
        side_files[scope] = _read_file(parsed, scope.id)
    for tmp in temps:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return _Loaded(session_id, main_file, side_files, index, high + 1, notes, retired)


def _no_payload(w: Write) -> bool:
    return isinstance(w, DeleteValue | DeleteList | RetireScope)


def _side_scope(path: Path, filename: str) -> EphemeralScope:
    enc = filename[len(SIDE_PREFIX) : -len(SIDE_SUFFIX)]
    try:
        scope = EphemeralScope(urllib.parse.unquote(enc, errors="strict"))
        ok = encode_scope_id(scope.id) == enc
    except (UnicodeDecodeError, StorageError):
        ok = False
    if not ok:
        raise CorruptStoreError(
            f"{path}: {filename!r} is not the name toolfold gives a side file (the scope id "
            "is not canonically percent-encoded); move it out of the .scopes directory",
            path=str(path),
        )
    return scope


def _check_side_header(parsed: _Parsed, scope: EphemeralScope, session_id: str) -> None:
    where = str(parsed.path)
    if parsed.header.get("sessionId") != session_id:
        raise CorruptStoreError(
            f"{where}: side file belongs to session id {parsed.header.get('sessionId')!r}, "
            f"not to this session ({session_id!r}); it was copied or left here from another "
            "session — move it away, then open again",
            path=where,
            record=1,
        )
    if parsed.header.get("scopeId") != scope.id:
        raise CorruptStoreError(
            f"{where}: header names scope {parsed.header.get('scopeId')!r} but the file name "
            f"says {scope.id!r}; the file was renamed — rename it back or move it away",
            path=where,
            record=1,
        )


# -- session -------------------------------------------------------------------------------


class JsonlSession(Session):
    """An open JSONL session (see :class:`JsonlRepository`)."""

    def __init__(self, name: str, directory: Path, policy: FsyncPolicy, loaded: _Loaded) -> None:
        super().__init__(name, loaded.next_seq)
        self._dir = directory
        self._side_dir = directory / f"{name}{SIDE_DIR_SUFFIX}"
        self._policy = policy
        self._session_id = loaded.session_id
        self._main = loaded.main
        self._sides = loaded.sides
        self._index = loaded.index
        self._retired = loaded.retired
        self.notes = loaded.notes
        #: Retired scopes whose side file could not be unlinked yet.
        self._cleanup: set[EphemeralScope] = set()
        self._refreshing = asyncio.Lock()

    @property
    def main_path(self) -> Path:
        """The main log file."""
        return self._main.path

    def side_path(self, scope: EphemeralScope) -> Path:
        """Where the side file of ``scope`` lives (whether or not it exists)."""
        return self._side_dir / _side_name(scope)

    async def _commit_writes(self, writes: tuple[Write, ...], scope: Scope) -> tuple[int, ...]:
        seqs = self._allocate(len(writes))
        if isinstance(scope, EphemeralScope):
            file = self._side_file(scope)
            sync = self._policy.side == "commit"
        else:
            file = self._main
            sync = self._policy.main == "commit"
        if file.broken is not None:
            raise BackendError(file.broken)
        line, payloads, token = encode_line(file.table, writes, seqs)
        if file.version >= 2:
            line = _frame(line)
        retiring = [w.scope for w in writes if isinstance(w, RetireScope)]
        doomed = [self._sides[sc] for sc in retiring if sc in self._sides]
        try:
            if sync:
                # fsync takes milliseconds: keep it off the event loop. The base class
                # keeps the session line held until this returns, even if cancelled.
                kept = await asyncio.to_thread(self._io, file, line, sync, doomed)
            else:
                kept = self._io(file, line, sync, doomed)
        except BaseException:
            undo(file.table, token)
            raise
        for w, seq, data in zip(writes, seqs, payloads, strict=True):
            self._index.apply(w, seq, data)
        for sc in retiring:
            dropped = self._sides.pop(sc, None)
            if dropped is not None and dropped in kept:
                self._sides[sc] = dropped  # still on disk, holding only dead records
                self._cleanup.add(sc)
            else:
                self._cleanup.discard(sc)
        return seqs

    def _io(self, file: _File, line: bytes, sync: bool, doomed: list[_File]) -> list[_File]:
        """Append the line; if it retired scopes, then unlink their side files. Returns
        the side files that could not be unlinked (reopen retries them).

        The unlinks run after the retirement is durable and still inside the session
        line, so no later write to a reused scope id can be overtaken by an old unlink.
        """
        self._write(file, line, sync)
        return [f for f in doomed if not _unlink(f)]

    def _side_file(self, scope: EphemeralScope) -> _File:
        if scope in self._cleanup:
            # A new lifetime of a retired id: get rid of the old file first if we can;
            # if not, the new records go after the dead ones (reopen tells them apart by
            # the retirement seq) and the file is no longer ours to delete.
            self._drop_side(scope)
            self._cleanup.discard(scope)
        file = self._sides.get(scope)
        if file is None:
            file = self._sides[scope] = _File(self.side_path(scope), scope.id)
        return file

    def _drop_side(self, scope: EphemeralScope) -> None:
        file = self._sides.pop(scope, None)
        if file is not None and not _unlink(file):
            self._sides[scope] = file  # still on disk, holding only dead records
            self._cleanup.add(scope)
            return
        self._cleanup.discard(scope)

    def _write(self, file: _File, line: bytes, sync: bool) -> None:
        """Append one transaction line (creating a side file first if needed)."""
        try:
            if not file.exists:
                self._create_side(file, sync)
            if file.fd is None:
                file.fd = os.open(file.path, os.O_WRONLY | os.O_APPEND | _CLOEXEC)
        except OSError as exc:
            raise BackendError(
                f"cannot open {file.path} for writing ({exc}); nothing was committed"
            ) from exc
        before = file.size
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(file.fd, view) :]
            if sync:
                _datasync(file.fd)
        except OSError as exc:
            # Take the partial line back, or the next append would bury a torn line
            # in the middle of the file (which reopen must refuse as damage).
            try:
                os.ftruncate(file.fd, before)
            except OSError as exc2:
                file.broken = (
                    f"{file.path}: an earlier write failed ({exc}) and its partial line could "
                    f"not be removed ({exc2}); close and reopen the session (reopen drops the "
                    "torn line)"
                )
            raise BackendError(
                f"cannot append to {file.path} ({exc}); the transaction was not committed"
            ) from exc
        file.size = before + len(line)

    def _create_side(self, file: _File, sync: bool) -> None:
        # temp file + atomic rename: a side file is either absent or has its header, so
        # a crash can never leave a headerless file that reopen would have to guess about.
        if not self._side_dir.is_dir():
            self._side_dir.mkdir(mode=PRIVATE_DIR, exist_ok=True)
            os.chmod(self._side_dir, PRIVATE_DIR)  # whatever the umask
            if sync:
                _sync_dir(self._dir)
        header = orjson.dumps(
            {
                "v": FORMAT_VERSION,
                "kind": "scope_header",
                "sessionId": self._session_id,
                "scopeId": file.scope_id,
            }
        )
        _atomic_create(file.path, header + b"\n", sync, exclusive=False)
        file.exists = True
        file.size = len(header) + 1

    async def _get_value(self, address: ValueAddress[Any]) -> JSON | None:
        sd = self._index.scopes.get(address.scope)
        data = None if sd is None else sd.values.get(address.namespace, {}).get(address.key)
        return None if data is None else load_stored(data)

    async def _scan_values(
        self, namespace: str, key_prefix: str, scope: Scope
    ) -> list[tuple[str, JSON]]:
        sd = self._index.scopes.get(scope)
        ns = {} if sd is None else sd.values.get(namespace, {})
        keys = sorted(k for k in ns if k.startswith(key_prefix))
        return [(k, load_stored(ns[k])) for k in keys]

    async def _read_list(
        self,
        address: ListAddress[Any],
        cursor: int | None,
        order: Order,
        limit: int | None,
        stop_at_tag: str | None,
    ) -> list[ListElement]:
        sd = self._index.scopes.get(address.scope)
        raw = [] if sd is None else sd.lists.get((address.namespace, address.key), [])
        page = page_sorted(raw, cursor=cursor, order=order, limit=limit, stop_at_tag=stop_at_tag)
        return [ListElement(e.seq, load_stored(e.data), e.tag) for e in page]

    async def _read_entries(
        self,
        cursor: int | None,
        limit: int | None,
        order: Order,
        keyed: bool,
        offset: int,
        summaries: bool,
    ) -> list[Entry]:
        return self._index.entries.read(cursor, limit, order, keyed, offset, summaries)

    async def _entries_by_key(self, key: str, prefix: bool, limit: int | None) -> list[Entry]:
        return self._index.entries.by_key(key, prefix, limit)

    async def _count_entries(self, keyed: bool) -> int:
        return self._index.entries.count(keyed)

    async def _live_scopes(self) -> list[EphemeralScope]:
        return [s for s in self._index.scopes if isinstance(s, EphemeralScope)]

    async def _refresh(self) -> None:
        if not self._read_only:
            return  # a writer's index is the file: nobody else appends to it
        async with self._refreshing:
            records, new_files, dropped = await asyncio.to_thread(self._read_appended)
            # Applied here, on the loop, so no read ever sees the index half-updated.
            for gone in dropped:
                self._sides.pop(gone, None)
            self._sides.update(new_files)
            for seq, w, payload, scope in records:
                if scope is not None and seq < self._retired.get(scope.id, 0):
                    continue  # an earlier lifetime of the scope, already retired
                if isinstance(w, RetireScope):
                    self._retired[w.scope.id] = seq
                    known = self._sides.get(w.scope)
                    if known is not None and known.last_seq < seq:
                        # That file held the retired lifetime: forget it, so a file made
                        # for the next lifetime (maybe with the same inode) is read whole.
                        del self._sides[w.scope]
                self._index.apply(w, seq, None if _no_payload(w) else orjson.dumps(payload))
                self._next_seq = max(self._next_seq, seq + 1)

    def _read_appended(
        self,
    ) -> tuple[
        list[tuple[int, Write, JSON, EphemeralScope | None]],
        dict[EphemeralScope, _File],
        set[EphemeralScope],
    ]:
        """(In a thread.) The complete records appended to the session's files since
        the last read, in seq order; the side files to read incrementally from now on;
        the side files to forget.

        Side files are read before the main log. A retirement is committed to the main
        log before its scope's next lifetime writes a side record, so a new-lifetime
        record read here has its retirement in the main log read after it. A side file
        whose scope that main log read retires is read again, whole: the file read
        before may have been the next lifetime's, made after the old one was unlinked
        (an inode number can come back). A side record appended after the side files
        were read has a smaller seq than some main records read now; the next refresh
        applies it, which is safe because ``_retired`` remembers retirements.
        """
        side: dict[EphemeralScope, list[tuple[int, Write, JSON]]] = {}
        new_files: dict[EphemeralScope, _File] = {}
        suspect: dict[EphemeralScope, CorruptStoreError] = {}
        try:
            entries = sorted(os.scandir(self._side_dir), key=lambda e: e.name)
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if _is_temp(entry.name) or not (
                entry.name.startswith(SIDE_PREFIX) and entry.name.endswith(SIDE_SUFFIX)
            ):
                continue
            scope = _side_scope(Path(entry.path), entry.name)
            known = self._sides.get(scope)
            try:
                with open(entry.path, "rb") as f:
                    ino = os.fstat(f.fileno()).st_ino
                    if known is not None and known.ino == ino:
                        try:
                            side[scope] = _read_more(known, f, scope)
                        except CorruptStoreError as exc:
                            suspect[scope] = exc  # damage, unless the main log retires it
                        continue
            except FileNotFoundError:
                continue  # retired and unlinked meanwhile: its retirement says so
            found = self._read_side(scope)
            if found is not None:
                new_files[scope], side[scope] = found
        main = self._main
        with open(main.path, "rb") as f:
            if os.fstat(f.fileno()).st_ino != main.ino:
                raise StorageError(
                    f"{main.path} was replaced since this reader opened it (the session "
                    "was deleted and made again?); open the session again"
                )
            main_records = _read_more(main, f, SESSION)
        retired = dict(self._retired)
        dropped: set[EphemeralScope] = set()
        for seq, w, _ in main_records:
            if not isinstance(w, RetireScope):
                continue
            retired[w.scope.id] = seq
            if w.scope in side or w.scope in suspect:
                suspect.pop(w.scope, None)
                side.pop(w.scope, None)
                new_files.pop(w.scope, None)
                dropped.add(w.scope)
                found = self._read_side(w.scope)
                if found is not None:
                    new_files[w.scope], side[w.scope] = found
        if suspect:
            raise next(iter(suspect.values()))
        for scope, file in list(new_files.items()):
            if file.last_seq < retired.get(scope.id, 0):
                # Only dead records (the writer is about to unlink it): read it whole
                # again next time rather than trust its inode number.
                del new_files[scope]
                dropped.add(scope)
        out: list[tuple[int, Write, JSON, EphemeralScope | None]]
        out = [(*r, None) for r in main_records]
        out += [(*r, scope) for scope, found in side.items() for r in found]
        out.sort(key=lambda r: r[0])
        return out, new_files, dropped

    def _read_side(
        self, scope: EphemeralScope
    ) -> tuple[_File, list[tuple[int, Write, JSON]]] | None:
        """(In a thread.) A side file read whole, or ``None`` if it is gone."""
        path = self.side_path(scope)
        try:
            with open(path, "rb") as f:
                ino = os.fstat(f.fileno()).st_ino
                parsed = _parse_file(path, f.read(), scope, "scope_header")
        except FileNotFoundError:
            return None
        _check_side_header(parsed, scope, self._session_id)
        parsed.ino = ino
        return _read_file(parsed, scope.id), [(seq, w, p) for seq, w, p, _ in parsed.records]

    async def _close(self) -> None:
        for scope in list(self._cleanup):
            self._drop_side(scope)
        for file in self._sides.values():
            file.close()
        self._main.close()  # also releases the advisory lock


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
        line = orjson.loads(raw)
    except orjson.JSONDecodeError:
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
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, PRIVATE_FILE)
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


# -- repository ----------------------------------------------------------------------------


class JsonlRepository(Repository):
    """Sessions as JSONL files in one directory (``jsonl:DIR``).

    ``<name>.jsonl`` is the main log (session scope, one line per transaction); each live
    ephemeral scope has a side file under ``<name>.jsonl.scopes/``. With the default
    :class:`FsyncPolicy` every commit is fsynced before ``commit()`` returns.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fsync: FsyncPolicy | None = None,
        read_only: bool = False,
    ):
        super().__init__(read_only=read_only)
        self._dir = Path(directory)
        self._policy = fsync if fsync is not None else FsyncPolicy()
        self.location = f"jsonl:{self._dir}"

    @property
    def directory(self) -> Path:
        """The directory holding the session files."""
        return self._dir

    def _main_path(self, name: str) -> Path:
        return self._dir / f"{name}{MAIN_SUFFIX}"

    async def _create_session(self, name: str) -> Session:
        await asyncio.to_thread(self._create_files, name)
        return await self._open_session(name, create=False)

    def _create_files(self, name: str) -> None:
        path = self._main_path(name)
        try:
            make_private_dirs(self._dir)
            if path.exists():
                raise SessionExistsError(f"session {name!r} already exists in {self.location}")
            # A side directory without a main log is what an interrupted delete leaves:
            # it belongs to no session, and must not be adopted by this new one.
            shutil.rmtree(self._dir / f"{name}{SIDE_DIR_SUFFIX}", ignore_errors=True)
            header = orjson.dumps(
                {
                    "v": FORMAT_VERSION,
                    "kind": "session_header",
                    "sessionId": secrets.token_hex(16),
                }
            )
            _atomic_create(path, header + b"\n", self._policy.main == "commit", exclusive=True)
        except FileExistsError:
            raise SessionExistsError(
                f"session {name!r} already exists in {self.location}"
            ) from None
        except OSError as exc:
            raise BackendError(f"cannot create session file {path} ({exc})") from exc

    async def _open_session(self, name: str, *, create: bool) -> Session:
        path = self._main_path(name)
        if not path.exists():
            if not create:
                raise SessionNotFoundError(
                    f"no session {name!r} in {self.location} (no file {path}); create it "
                    "first (create_session, or open_session(..., create=True))"
                )
            return await self._create_session(name)
        loaded = await asyncio.to_thread(self._load, name)
        return JsonlSession(name, self._dir, self._policy, loaded)

    async def _open_reader(self, name: str) -> Session:
        loaded = await asyncio.to_thread(self._load_reader, name)
        return JsonlSession(name, self._dir, self._policy, loaded)

    def _load_reader(self, name: str) -> _Loaded:
        # No lock (a writer may be appending; its in-flight line reads as a torn tail)
        # and no repair: a reader never changes a file.
        path = self._main_path(name)
        try:
            return _load_session(self._dir, name, None)
        except FileNotFoundError:
            raise SessionNotFoundError(
                f"no session {name!r} in {self.location} (no file {path})"
            ) from None
        except OSError as exc:
            raise BackendError(f"cannot read session {name!r} from {path} ({exc})") from exc

    def _load(self, name: str) -> _Loaded:
        path = self._main_path(name)
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | _CLOEXEC)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {name!r} in {self.location}") from None
        except OSError as exc:
            raise BackendError(f"cannot open {path} ({exc})") from exc
        try:
            _lock(fd, path)
            return _load_session(self._dir, name, fd)
        except OSError as exc:
            os.close(fd)
            raise BackendError(f"cannot read session {name!r} from {path} ({exc})") from exc
        except BaseException:
            os.close(fd)
            raise

    async def _list_sessions(self) -> list[str]:
        return await asyncio.to_thread(self._scan_sessions)

    def _scan_sessions(self) -> list[str]:
        try:
            entries = list(os.scandir(self._dir))
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise BackendError(f"cannot list {self._dir} ({exc})") from exc
        names = []
        for entry in entries:
            # Side files end in .scope and live in .scopes dirs, temp files start with
            # "." — none of them can be mistaken for a session.
            if not entry.name.endswith(MAIN_SUFFIX) or not entry.is_file():
                continue
            name = entry.name[: -len(MAIN_SUFFIX)]
            if name and not name.startswith(".") and _valid_name(name):
                names.append(name)
        return names

    async def _delete_session(self, name: str) -> None:
        await asyncio.to_thread(self._delete_files, name)

    def _delete_files(self, name: str) -> None:
        path = self._main_path(name)
        try:
            fd = os.open(path, os.O_RDONLY | _CLOEXEC)
        except FileNotFoundError:
            raise SessionNotFoundError(
                f"no session {name!r} in {self.location} to delete"
            ) from None
        except OSError as exc:
            raise BackendError(f"cannot open {path} ({exc})") from exc
        try:
            _lock(fd, path)
            # Unlinking the main log is the commit point of a delete; a side directory
            # left behind by a crash after it is removed by the next create of the name.
            os.unlink(path)
            if self._policy.main == "commit":
                _sync_dir(self._dir)
        except OSError as exc:
            raise BackendError(f"cannot delete {path} ({exc})") from exc
        finally:
            os.close(fd)
        shutil.rmtree(self._dir / f"{name}{SIDE_DIR_SUFFIX}", ignore_errors=True)

    async def _close(self) -> None:
        pass

    # -- the change signal ------------------------------------------------------------

    def _files(self, name: str) -> list[Path]:
        side_dir = self._dir / f"{name}{SIDE_DIR_SUFFIX}"
        try:
            sides = [
                Path(e.path)
                for e in os.scandir(side_dir)
                if e.name.startswith(SIDE_PREFIX) and e.name.endswith(SIDE_SUFFIX)
            ]
        except FileNotFoundError:
            sides = []
        return [self._main_path(name), *sorted(sides)]

    def _high_water_now(self, name: str) -> int:
        # Retired side files may vanish while we look: their seqs are below the
        # retirement's, which the main log holds.
        high = 0
        for i, path in enumerate(self._files(name)):
            try:
                high = max(high, _last_seq(path))
            except FileNotFoundError:
                if i == 0:
                    raise SessionNotFoundError(
                        f"no session {name!r} in {self.location} (no file {path}) to follow"
                    ) from None
            except OSError as exc:
                raise BackendError(f"cannot read {path} ({exc})") from exc
        return high

    async def _high_water(self, name: str) -> int:
        return await asyncio.to_thread(self._high_water_now, name)

    def _signature(
        self, name: str, listings: dict[str, tuple[tuple[int, int], list[str]]]
    ) -> tuple[int, ...] | None:
        """(ino, size, mtime) of the session's files, ``None`` if it was deleted. The
        side directory is listed again only when its own (ino, mtime) moved (a side
        file made or unlinked), so a quiet session costs two ``stat`` calls and one
        per side file. A listing taken within a second of the directory's mtime is
        not reused: a file made in the same clock tick as the listing leaves the
        mtime unchanged (the "racy" case version control systems guard against)."""
        base = os.path.join(self._dir, name)
        try:
            st = os.stat(base + MAIN_SUFFIX)
        except FileNotFoundError:
            return None
        found = [st.st_ino, st.st_size, st.st_mtime_ns]
        side_dir = base + SIDE_DIR_SUFFIX
        try:
            st = os.stat(side_dir)
        except FileNotFoundError:
            return tuple(found)
        listed = (st.st_ino, st.st_mtime_ns)
        cached = listings.get(name)
        if cached is None or cached[0] != listed or time.time_ns() - listed[1] < 1_000_000_000:
            try:
                sides = sorted(
                    e.path
                    for e in os.scandir(side_dir)
                    if e.name.startswith(SIDE_PREFIX) and e.name.endswith(SIDE_SUFFIX)
                )
            except FileNotFoundError:
                sides = []
            cached = listings[name] = (listed, sides)
        for path in cached[1]:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                found.append(-1)  # unlinked since listed: the next round lists again
                continue
            found += (st.st_ino, st.st_size, st.st_mtime_ns)
        return tuple(found)

    def _moved(
        self,
        names: list[str],
        seen: dict[str, tuple[int, ...] | None],
        listings: dict[str, tuple[tuple[int, int], list[str]]],
    ) -> list[tuple[str, int]]:
        """(In a thread.) The sessions among ``names`` whose files changed since
        ``seen`` was taken, with their high-water seqs; ``seen`` is brought up to date."""
        moved = []
        for name in names:
            signature = self._signature(name, listings)
            if name in seen and seen[name] == signature:
                continue
            seen[name] = signature
            if signature is not None:
                with contextlib.suppress(StorageError):
                    moved.append((name, self._high_water_now(name)))
        for name in [n for n in seen if n not in names]:
            del seen[name]
            listings.pop(name, None)
        return moved

    async def _watch(self, waiters: ChangeWaiters, ready: Callable[[], None]) -> None:
        # Another process appends to the files: their sizes are the signal (a stat
        # each, no read). Only a file that changed is read, and only its last line.
        seen: dict[str, tuple[int, ...] | None] = {}
        listings: dict[str, tuple[tuple[int, int], list[str]]] = {}
        ready()
        while True:
            await waiters.wait_nonempty()
            await asyncio.sleep(CHANGE_POLL_INTERVAL)
            moved = await asyncio.to_thread(self._moved, waiters.names, seen, listings)
            for name, high in moved:
                waiters.publish(name, high)


def _valid_name(name: str) -> bool:
    try:
        check_session_name(name)
    except StorageError:
        return False
    return True
