"""Backends under test: open / reopen helpers shared by the storage test files."""

from __future__ import annotations

from pathlib import Path

from toolfold.storage import MemoryRepository, Repository, Session, open_repository

#: Every backend the conformance suite and the model test run against.
BACKENDS = ["memory", "jsonl", "sqlite", "postgres"]


class Store:
    """One store location of one backend; opens sessions and reopens them from scratch.

    "Reopen" closes the session *and* its repository, then opens a new repository
    object at the same location — except for memory, whose data lives in the repository
    object, so there only the session is closed and opened again.
    """

    def __init__(self, kind: str, tmp_path: Path, pg_url: str | None = None) -> None:
        self.kind = kind
        if kind == "memory":
            self.url = "memory:"
        elif kind == "sqlite":
            self.url = f"sqlite:{tmp_path / 'store.db'}"
        elif kind == "jsonl":
            (tmp_path / "jsonl").mkdir(exist_ok=True)
            self.url = f"jsonl:{tmp_path / 'jsonl'}"
        elif kind == "postgres":
            if pg_url is None:
                raise ValueError("postgres backend needs a database URL")
            self.url = pg_url
        else:
            raise ValueError(kind)
        self._memory: MemoryRepository | None = None
        self._repos: list[Repository] = []

    def repository(self) -> Repository:
        if self.kind == "memory":
            if self._memory is None:
                self._memory = MemoryRepository()
                self._repos.append(self._memory)
            return self._memory
        repo = open_repository(self.url)
        self._repos.append(repo)
        return repo

    async def session(self, name: str = "s1") -> Session:
        return await self.repository().open_session(name, create=True)

    async def reopen(self, session: Session) -> Session:
        """Close the session and its repositories (as if the process ended), then open it
        again from the store."""
        name = session.name
        await session.close()
        if self.kind != "memory":
            for repo in self._repos:
                await repo.close()
            self._repos.clear()
        return await self.repository().open_session(name)

    async def aclose(self) -> None:
        for repo in self._repos:
            await repo.close()
