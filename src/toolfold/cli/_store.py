"""Store URLs for the CLI: the default store, ``TOOLFOLD_STORE``, spill directories, errors."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from toolfold._fsperm import UnsafePathError, make_private_dirs
from toolfold._record import record

from ._errors import StoreOpenError, StoreURLError, UnknownSessionError

if TYPE_CHECKING:
    from toolfold.storage import Repository, Session, StorageError

# toolfold.storage (and asyncio with it) is imported where a store is opened, not at
# module import: `toolfold --help` and argument errors answer without loading it.

DEFAULT_STORE = "sqlite:.toolfold/toolfold.db"
"""The embedded default: one SQLite file under ``.toolfold/`` in the current directory."""

STORE_ENV = "TOOLFOLD_STORE"
"""Environment variable naming the store when ``--store`` is not given."""

_PASSWORD = r"^(postgres(?:ql)?://[^:/@?]*:)[^@/?]*(@)"
_QUERY_PASSWORD = r"([?&]password=)[^&]*"
"""A database password in a URL: its user info, or its ``password`` query parameter.
Compiled on first use (``re``'s cache): a URL that can hold neither is shown as is."""

SCHEMES = ("sqlite:PATH", "jsonl:DIR", "postgresql://...", "memory:")


@record(frozen=True)
class StoreSpec:
    """A parsed store URL: the URL handed to ``open_repository`` and the directory the
    store owns on this machine (spill files go under ``<dir>/spill/<session>/``)."""

    url: str
    kind: str
    home: Path
    default: bool = False
    """The embedded default (no ``--store``, no ``$TOOLFOLD_STORE``): the only store whose
    directory the CLI creates; an explicit path must name an existing directory."""

    def spill_dir(self, session: str) -> Path:
        """Where full output of commands run in ``session`` is spilled."""
        return self.home / "spill" / session

    def describe(self) -> str:
        """The URL for messages, with a database password masked (messages end up in
        logs and CI output)."""
        if "password=" not in self.url and not self.url.startswith("postgres"):
            return self.url
        return re.sub(_QUERY_PASSWORD, r"\1***", re.sub(_PASSWORD, r"\1***\2", self.url))


def resolve_store(url: str | None) -> StoreSpec:
    """Parse ``url`` (``None``: ``$TOOLFOLD_STORE``, else the default SQLite file).

    Only explicit schemes are accepted here (plus a bare path ending in ``.db``):
    a typo such as ``sqlit:x`` must fail loudly rather than become a directory name.
    """
    if url is None:
        url = os.environ.get(STORE_ENV) or ""
        if not url.strip():
            spec = resolve_store(DEFAULT_STORE)
            return StoreSpec(spec.url, spec.kind, spec.home, default=True)
    url = url.strip()
    if url in ("memory:", "memory"):
        return StoreSpec("memory:", "memory", Path(".toolfold").absolute())
    if url.startswith(("postgresql://", "postgres://")):
        return StoreSpec(url, "postgresql", Path(".toolfold").absolute())
    if url.startswith("sqlite:"):
        path = url[len("sqlite:") :]
        path = path[2:] if path.startswith("//") else path
        if not path:
            raise StoreURLError(f"store URL {url!r} names no file; use sqlite:PATH/TO/file.db")
        file = Path(path).expanduser().absolute()
        return StoreSpec(f"sqlite:{file}", "sqlite", file.parent)
    if url.startswith("jsonl:"):
        path = url[len("jsonl:") :]
        if not path:
            raise StoreURLError(f"store URL {url!r} names no directory; use jsonl:DIR")
        directory = Path(path).expanduser().absolute()
        return StoreSpec(f"jsonl:{directory}", "jsonl", directory)
    scheme, sep, _ = url.partition(":")
    if not sep and url.endswith(".db"):
        file = Path(url).expanduser().absolute()
        return StoreSpec(f"sqlite:{file}", "sqlite", file.parent)
    where = f"scheme {scheme + ':'!r}" if sep else "no scheme"
    raise StoreURLError(f"unknown store URL {url!r} ({where}); use one of {', '.join(SCHEMES)}")


def storage_message(exc: StorageError, spec: StoreSpec) -> str:
    """One line for a storage failure, naming the file and record when the store knows them."""
    from toolfold.storage import CorruptStoreError

    text = " ".join(str(exc).split())
    if isinstance(exc, CorruptStoreError):
        where = f"file {exc.path}" + (f", record {exc.record}" if exc.record is not None else "")
        where += f", byte {exc.offset}" if exc.offset is not None else ""
        # The backend's text already says what to do (restore, cut the line, move aside).
        return f"store {spec.describe()} is corrupt ({where}): {text}"
    return f"store {spec.describe()} cannot be used: {text}"


def report_notes(session: Session) -> None:
    """Say on stderr what opening ``session`` found and dealt with (a torn last record
    dropped by a writer, or skipped by a reader)."""
    import sys

    for note in session.notes:
        print(f"toolfold: note: {' '.join(note.split())}", file=sys.stderr, flush=True)


def prepare(spec: StoreSpec, *, create: bool) -> None:
    """Make the store's directory exist when we are going to write (``create``); refuse
    to read a file store that is not there (a typo must not create an empty store)."""
    try:
        _prepare(spec, create=create)
    except UnsafePathError as exc:
        raise StoreOpenError(f"store {spec.describe()} cannot be used: {exc}") from exc
    except OSError as exc:
        raise StoreOpenError(
            f"cannot create the store directory for {spec.describe()}: "
            f"{exc.strerror or exc} ({exc.filename}); pick a writable place with --store"
        ) from exc


def _prepare(spec: StoreSpec, *, create: bool) -> None:
    if spec.kind == "sqlite":
        file = Path(spec.url[len("sqlite:") :])
        if create and spec.default:
            make_private_dirs(file.parent)
        elif create:
            _need_directory(file.parent, spec)
        elif not file.exists():
            raise StoreOpenError(
                f"no store at {file} (store URL {spec.describe()}); run `toolfold run -- ...` "
                "here first, or pass --store / set TOOLFOLD_STORE"
            )
        elif file.is_dir():
            raise StoreOpenError(f"store file {file} is a directory; use jsonl:{file} for JSONL")
    elif spec.kind == "jsonl":
        directory = Path(spec.url[len("jsonl:") :])
        if directory.exists() and not directory.is_dir():
            raise StoreOpenError(
                f"store path {directory} is a file, not a JSONL store directory (store URL "
                f"{spec.describe()}); use sqlite:{directory} if it is a SQLite store, or "
                "name a directory"
            )
        if create:
            # The store directory itself is made (0700) by the store; its parent must exist.
            _need_directory(directory.parent, spec)
        elif not directory.is_dir():
            raise StoreOpenError(
                f"no store directory {directory} (store URL {spec.describe()}); "
                "run `toolfold run --store jsonl:DIR -- ...` first"
            )


def _need_directory(directory: Path, spec: StoreSpec) -> None:
    if not directory.is_dir():
        raise StoreOpenError(
            f"store {spec.describe()}: the directory {directory} does not exist; create it "
            "first (toolfold creates only the default store's directory, .toolfold/)"
        )


@contextlib.asynccontextmanager
async def open_store(
    spec: StoreSpec, *, create: bool, read_only: bool = False
) -> AsyncIterator[Repository]:
    """Open the repository named by ``spec``; storage failures become ``StoreOpenError``.

    ``read_only`` (the reading commands): nothing in the store is created, locked,
    repaired or written — a reader must never change what it reads."""
    from toolfold.storage import StorageError, open_repository

    prepare(spec, create=create)
    try:
        repo = open_repository(spec.url, read_only=read_only)
    except StorageError as exc:
        raise StoreOpenError(storage_message(exc, spec)) from exc
    except ImportError as exc:  # only the PostgreSQL backend has a driver of its own
        from toolfold._extras import missing_extra

        what = f"the store {spec.describe()}"
        raise StoreOpenError(missing_extra(what, "postgres", exc.name)) from exc
    try:
        yield repo
    except StorageError as exc:
        raise StoreOpenError(storage_message(exc, spec)) from exc
    finally:
        with contextlib.suppress(StorageError, OSError):
            await repo.close()


async def open_existing_session(repo: Repository, spec: StoreSpec, name: str) -> Session:
    """Open session ``name``; an unknown name is an ``UnknownSessionError`` listing a few
    that exist."""
    from toolfold.storage import BackendError, SessionNotFoundError, StorageError

    try:
        session = await repo.open_session(name)
    except SessionNotFoundError as exc:
        try:
            names = await repo.list_sessions()
        except StorageError:
            names = []
        known = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "") if names else "none"
        raise UnknownSessionError(
            f"no session {name!r} in store {spec.describe()} (sessions: {known}); "
            "see `toolfold sessions`"
        ) from exc
    except BackendError as exc:
        raise StoreOpenError(storage_message(exc, spec)) from exc
    report_notes(session)
    return session
