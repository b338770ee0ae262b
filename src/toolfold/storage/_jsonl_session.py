"""An open JSONL session: commits appended to its main log and side files, reads from its
in-memory index, and a reader's refresh from what another process appended."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from toolfold import _json
from toolfold._fsperm import open_private_dir, open_private_file

from ._addresses import SESSION, EphemeralScope, ListAddress, Scope, ValueAddress
from ._base import Session
from ._entries import Entry, ListElement
from ._errors import (
    BackendError,
    CorruptStoreError,
    StorageError,
)
from ._jsonl_files import (
    FORMAT_VERSION,
    SIDE_DIR_SUFFIX,
    SIDE_PREFIX,
    SIDE_SUFFIX,
    _atomic_create,
    _datasync,
    _File,
    _frame,
    _is_temp,
    _parse_file,
    _read_file,
    _read_more,
    _side_name,
    _sync_dir,
    _unlink,
)
from ._jsonl_load import (
    _check_side_header,
    _Loaded,
    _no_payload,
    _side_scope,
)
from ._jsonl_records import encode_line, undo
from ._paging import page_sorted
from ._records import FsyncPolicy, Order, load_stored
from ._writes import (
    JSON,
    RetireScope,
    Write,
    write_scope,
)

try:  # advisory lock: one writer per session file across processes (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]

__all__ = ["JsonlSession"]


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
        if scope == SESSION and writes:
            # From commit_across: the session writes, then one ephemeral scope's.
            cut = next((i for i, w in enumerate(writes) if write_scope(w) != SESSION), None)
            if cut is not None:
                return await self._commit_two(writes[:cut], writes[cut:])
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

    async def _commit_two(
        self, main_writes: tuple[Write, ...], side_writes: tuple[Write, ...]
    ) -> tuple[int, ...]:
        """Session writes to the main log, then one scope's to its side file, in one pass
        of the session line and one hop off the event loop (see ``commit_across``)."""
        seqs = self._allocate(len(main_writes) + len(side_writes))
        main_seqs, side_seqs = seqs[: len(main_writes)], seqs[len(main_writes) :]
        scope = write_scope(side_writes[0])
        assert isinstance(scope, EphemeralScope)
        main, side = self._main, self._side_file(scope)
        for file in (main, side):
            if file.broken is not None:
                raise BackendError(file.broken)
        main_line, main_payloads, main_token = encode_line(main.table, main_writes, main_seqs)
        try:
            side_line, side_payloads, side_token = encode_line(side.table, side_writes, side_seqs)
        except BaseException:
            undo(main.table, main_token)
            raise
        if main.version >= 2:
            main_line = _frame(main_line)
        if side.version >= 2:
            side_line = _frame(side_line)
        main_sync = self._policy.main == "commit"
        side_sync = self._policy.side == "commit"
        wrote_main = False

        def io() -> None:
            nonlocal wrote_main
            self._write(main, main_line, main_sync)
            wrote_main = True
            self._write(side, side_line, side_sync)

        try:
            if main_sync or side_sync:
                await asyncio.to_thread(io)
            else:
                io()
        except BaseException:
            undo(side.table, side_token)
            if not wrote_main:
                undo(main.table, main_token)
            else:
                # The main log has its line: what it holds is committed, the scope's
                # part is not (the state of two commits with the second failing).
                for w, seq, data in zip(main_writes, main_seqs, main_payloads, strict=True):
                    self._index.apply(w, seq, data)
            raise
        for w, seq, data in zip(main_writes, main_seqs, main_payloads, strict=True):
            self._index.apply(w, seq, data)
        for w, seq, data in zip(side_writes, side_seqs, side_payloads, strict=True):
            self._index.apply(w, seq, data)
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
        """Append one transaction line (creating a side file first if needed: then the
        line is in the file the rename puts in place, so it costs no flush of its own)."""
        try:
            created = not file.exists
            if created:
                self._create_side(file, sync, line)
            if file.fd is None:
                file.fd = open_private_file(file.path, os.O_WRONLY | os.O_APPEND, create=False)
            if created:
                return
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

    def _create_side(self, file: _File, sync: bool, first: bytes) -> None:
        # temp file + atomic rename: a side file is either absent or has its header and
        # its first record, so a crash can never leave a headerless file that reopen
        # would have to guess about, and the first commit of a scope (an operation's
        # start) costs the flushes of the rename, not one more for an append.
        if not self._side_dir.is_dir():
            # 0700 whatever the umask, and never a link someone planted in its place.
            os.close(open_private_dir(self._dir, self._side_dir.name))
            if sync:
                _sync_dir(self._dir)
        header = _json.dumps(
            {
                "v": FORMAT_VERSION,
                "kind": "scope_header",
                "sessionId": self._session_id,
                "scopeId": file.scope_id,
            }
        )
        _atomic_create(file.path, header + b"\n" + first, sync, exclusive=False)
        file.exists = True
        file.size = len(header) + 1 + len(first)

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
                self._index.apply(w, seq, None if _no_payload(w) else _json.dumps(payload))
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
                    # A file known to hold only dead records (a retirement whose unlink
                    # failed) is never trusted by its inode: the id's next lifetime may be
                    # a new file with the same number, and its retirement was read already.
                    dead = known is not None and known.last_seq < self._retired.get(scope.id, 0)
                    if known is not None and known.ino == ino and not dead:
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
