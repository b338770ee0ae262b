"""Fixtures of the durability tests: a store per backend, a session tap for crashes and
delays, and small helpers to build sinks and streams."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from toolfold.storage import MemoryRepository, Repository, Session, open_repository

#: The backends every durability behaviour is checked on (PostgreSQL: see test_durability_pg).
BACKENDS = ["memory", "jsonl", "sqlite"]


class SimulatedCrash(BaseException):
    """Raised by :class:`Tap` in place of a storage call: the process 'died' there.

    A ``BaseException`` so that no ``except Exception`` in the code under test can
    swallow it, the way nothing survives a SIGKILL."""


class Tap:
    """A session wrapper: counts commits, 'crashes' before commit #k, or holds a commit
    until an event is set (before it enters the session line, or inside it)."""

    def __init__(self, inner: Session) -> None:
        self.inner = inner
        self.commits = 0
        self.crash_at: int | None = None
        self.hold_at: int | None = None
        self.hold_inside = False
        self.release = asyncio.Event()
        self.held = asyncio.Event()
        self.fail_at: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, writes: Sequence[Any] | Callable[[], Sequence[Any]]) -> Any:
        self.commits += 1
        n = self.commits
        if self.crash_at is not None and n >= self.crash_at:
            raise SimulatedCrash(f"crash before commit #{n}")
        if self.fail_at == n:
            from toolfold.storage import BackendError

            raise BackendError(f"injected failure of commit #{n}")
        if self.hold_at == n and not self.hold_inside:
            # A slow request: it has not reached the session line yet.
            self.held.set()
            await self.release.wait()
        if self.hold_at == n and self.hold_inside:
            # A slow write: it holds the session line (its payload is already computed)
            # while the backend "writes"; every later commit queues behind it.
            inner: Any = self.inner
            original = inner._commit_writes

            async def slow(ws: Any, scope: Any) -> Any:
                inner._commit_writes = original
                self.held.set()
                await self.release.wait()
                return await original(ws, scope)

            inner._commit_writes = slow
        return await self.inner.commit(writes)


class Store:
    """One store location of one backend, able to 'restart' (close and reopen)."""

    def __init__(self, kind: str, tmp_path: Path, url: str | None = None) -> None:
        self.kind = kind
        if kind == "memory":
            self.url = "memory:"
        elif kind == "sqlite":
            self.url = f"sqlite:{tmp_path / 'store.db'}"
        elif kind == "jsonl":
            (tmp_path / "jsonl").mkdir(exist_ok=True)
            self.url = f"jsonl:{tmp_path / 'jsonl'}"
        elif kind == "postgres":
            assert url is not None
            self.url = url
        else:
            raise ValueError(kind)
        self.path = tmp_path
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

    async def restart(self, session: Session | Tap) -> Session:
        """Close everything (the process 'died') and open the session from its store."""
        inner = session.inner if isinstance(session, Tap) else session
        name = inner.name
        await inner.close()
        if self.kind != "memory":
            for repo in self._repos:
                await repo.close()
            self._repos.clear()
        return await self.repository().open_session(name)

    async def aclose(self) -> None:
        for repo in self._repos:
            await repo.close()


@pytest.fixture(params=BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A fresh store of each backend in turn."""
    s = Store(request.param, tmp_path)
    try:
        yield s
    finally:
        await s.aclose()
