"""Loading a JSONL session from disk: the in-memory index of what it holds, and the read
(and, for a writer, the repair) of its main log and side files.

The framing and parsing of one file are ``_jsonl_files``'; this module puts the files of
a session together, checks them against each other and rebuilds the index.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from toolfold import _json

from ._addresses import SESSION, EphemeralScope, Scope, encode_scope_id
from ._entries import EntryIndex
from ._errors import CorruptStoreError, StorageError
from ._jsonl_files import (
    MAIN_SUFFIX,
    SIDE_DIR_SUFFIX,
    SIDE_PREFIX,
    SIDE_SUFFIX,
    _File,
    _is_temp,
    _parse_file,
    _Parsed,
    _read_file,
)
from ._records import StoredElement
from ._writes import (
    AppendEntry,
    AppendList,
    DeleteList,
    DeleteValue,
    RetireScope,
    SetValue,
    Write,
)

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
            self.entries.append(seq, _payload(data), w.key, _json.dumps(w.summary))
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
        index.apply(w, seq, None if _no_payload(w) else _json.dumps(payload))

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
