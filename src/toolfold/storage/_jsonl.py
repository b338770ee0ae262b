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
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from toolfold import _json
from toolfold._fsperm import UnsafePathError, make_private_dirs, open_private_file

from ._base import Session
from ._base_repository import Repository
from ._changes import CHANGE_POLL_INTERVAL, ChangeWaiters
from ._errors import (
    BackendError,
    SessionExistsError,
    SessionNotFoundError,
    StorageError,
)
from ._records import FsyncPolicy, check_session_name

try:  # advisory lock: one writer per session file across processes (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX
    fcntl = None  # type: ignore[assignment]
from ._jsonl_files import (
    _CLOEXEC,
    FORMAT_VERSION,
    MAIN_SUFFIX,
    SIDE_DIR_SUFFIX,
    SIDE_PREFIX,
    SIDE_SUFFIX,
    _atomic_create,
    _last_seq,
    _lock,
    _sync_dir,
)
from ._jsonl_load import (
    _load_session,
    _Loaded,
)
from ._jsonl_session import JsonlSession

__all__ = ["JsonlRepository", "JsonlSession"]

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
            self._make_dir()
            if path.exists():
                raise SessionExistsError(f"session {name!r} already exists in {self.location}")
            # A side directory without a main log is what an interrupted delete leaves:
            # it belongs to no session, and must not be adopted by this new one.
            shutil.rmtree(self._dir / f"{name}{SIDE_DIR_SUFFIX}", ignore_errors=True)
            header = _json.dumps(
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
        except UnsafePathError as exc:
            raise BackendError(str(exc)) from exc
        except OSError as exc:
            raise BackendError(f"cannot create session file {path} ({exc})") from exc

    def _make_dir(self) -> None:
        """The store directory: created (0700, with missing parents) if missing, and
        judged by toolfold._fsperm's rule. (The CLI refuses an explicit store whose
        parent is missing before it gets here.)"""
        make_private_dirs(self._dir)

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
            fd = open_private_file(path, os.O_RDWR | os.O_APPEND, create=False)
        except FileNotFoundError:
            raise SessionNotFoundError(f"no session {name!r} in {self.location}") from None
        except UnsafePathError as exc:
            raise BackendError(str(exc)) from exc
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
