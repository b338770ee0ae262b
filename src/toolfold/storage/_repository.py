"""``open_repository(url)``: pick a backend from a store URL."""

from __future__ import annotations

from pathlib import Path

from ._base_repository import Repository
from ._errors import StorageError
from ._records import FsyncPolicy

__all__ = ["SCHEMES", "open_repository"]

#: The URL forms :func:`open_repository` understands.
SCHEMES = ("memory:", "sqlite:PATH", "jsonl:DIR", "postgresql://...")


def open_repository(
    url: str, *, fsync: FsyncPolicy | None = None, read_only: bool = False
) -> Repository:
    """Return the repository named by ``url`` (nothing is opened until first use).

    - ``memory:`` — in this process only;
    - ``sqlite:PATH/TO/file.db`` (or a plain path ending in ``.db``) — one SQLite file;
    - ``jsonl:DIR`` (or a path to an existing directory) — JSONL files in ``DIR``;
    - ``postgresql://...`` / ``postgres://...`` — a PostgreSQL database (psycopg DSN).

    ``fsync`` defaults to :class:`FsyncPolicy` ``()``: every commit durable.
    ``read_only`` gives a repository that never creates, repairs or writes anything
    (its sessions are readers; see :meth:`Repository.open_session`).
    An unknown scheme is a :class:`StorageError` listing the known ones.
    """
    if not isinstance(url, str) or not url:
        raise StorageError(f"store URL must be a non-empty str, got {url!r}; use one of {SCHEMES}")
    policy = fsync if fsync is not None else FsyncPolicy()
    if not isinstance(policy, FsyncPolicy):
        raise StorageError(f"fsync must be a FsyncPolicy or None, got {fsync!r}")
    if url == "memory:" or url == "memory":
        from ._memory import MemoryRepository

        return MemoryRepository(read_only=read_only)
    if url.startswith(("postgresql://", "postgres://")):
        from ._postgres import PostgresRepository

        return PostgresRepository(url, fsync=policy, read_only=read_only)  # type: ignore[no-any-return,unused-ignore]
    if url.startswith("sqlite:"):
        path = url[len("sqlite:") :]
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise StorageError(f"store URL {url!r} names no file; use sqlite:PATH/TO/file.db")
        from ._sqlite import SqliteRepository

        return SqliteRepository(path, fsync=policy, read_only=read_only)  # type: ignore[no-any-return,unused-ignore]
    if url.startswith("jsonl:"):
        directory = url[len("jsonl:") :]
        if not directory:
            raise StorageError(f"store URL {url!r} names no directory; use jsonl:DIR")
        from ._jsonl import JsonlRepository  # type: ignore[import-not-found,unused-ignore]

        return JsonlRepository(directory, fsync=policy, read_only=read_only)  # type: ignore[no-any-return,unused-ignore]
    scheme, sep, _ = url.partition(":")
    if url.endswith(".db") and not (sep and len(scheme) > 1 and "/" not in scheme):
        from ._sqlite import SqliteRepository

        return SqliteRepository(url, fsync=policy, read_only=read_only)  # type: ignore[no-any-return,unused-ignore]
    if Path(url).is_dir():
        from ._jsonl import JsonlRepository  # type: ignore[import-not-found,unused-ignore]

        return JsonlRepository(url, fsync=policy, read_only=read_only)  # type: ignore[no-any-return,unused-ignore]
    raise StorageError(
        f"unknown store URL {url!r}: use one of {', '.join(SCHEMES)} "
        "(a plain path ending in .db means sqlite, an existing directory means jsonl)"
    )
