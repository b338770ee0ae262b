"""The change watcher failing or never starting: every wait ends with the reason.

A backend's watcher is what wakes ``wait_for_change``; if it breaks, a waiter must not
hang. These tests replace the SQLite watcher's one hook (``_watch``) with one that
fails or never becomes ready, and check what the shared code in ``_base.py`` makes of
it. Every wait is bounded by a hang guard, never a timing assertion."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from toolfold.storage import BackendError, ClosedError, StorageError
from toolfold.storage._changes import ChangeWaiters
from toolfold.storage._sqlite import SqliteRepository

GUARD = 10  # seconds: a hang guard around waits that must end


class BrokenWatch(SqliteRepository):
    """SQLite, but the watcher raises ``fail`` (after declaring itself ready when
    ``after_ready``, once someone waits), or never gets ready when ``fail`` is None."""

    def __init__(self, path: Path, fail: Exception | None, *, after_ready: bool) -> None:
        super().__init__(path)
        self.fail, self.after_ready = fail, after_ready

    async def _watch(self, waiters: ChangeWaiters, ready: Callable[[], None]) -> None:
        if self.fail is None:
            await asyncio.Event().wait()  # never ready, until cancelled
        if self.after_ready:
            ready()
            await waiters.wait_nonempty()
        raise self.fail  # type: ignore[misc]


@pytest.mark.parametrize("after_ready", [False, True])
async def test_a_watcher_that_breaks_ends_the_wait_with_its_reason(
    tmp_path: Path, after_ready: bool
) -> None:
    repo = BrokenWatch(tmp_path / "s.db", OSError("disk gone"), after_ready=after_ready)
    await (await repo.create_session("s")).close()
    try:
        with pytest.raises(StorageError) as info:
            async with asyncio.timeout(GUARD):
                await repo.wait_for_change("s", 0)
        assert type(info.value) is StorageError
        assert (
            str(info.value) == f"watching {repo.location} for changes failed: OSError('disk gone')"
        )
    finally:
        await repo.close()


@pytest.mark.parametrize("after_ready", [False, True])
async def test_a_storage_error_of_the_watcher_reaches_the_waiter_as_it_is(
    tmp_path: Path, after_ready: bool
) -> None:
    failure = BackendError("the store went away")
    repo = BrokenWatch(tmp_path / "s.db", failure, after_ready=after_ready)
    await (await repo.create_session("s")).close()
    try:
        with pytest.raises(BackendError) as info:
            async with asyncio.timeout(GUARD):
                await repo.wait_for_change("s", 0)
        assert info.value is failure
    finally:
        await repo.close()


async def test_closing_before_the_watcher_is_ready_ends_the_wait(tmp_path: Path) -> None:
    repo = BrokenWatch(tmp_path / "s.db", None, after_ready=False)
    wait = asyncio.create_task(repo.wait_for_change("s", 0))
    try:
        for _ in range(2000):  # bounded: until the wait has started the watcher
            if repo._watcher is not None:
                break
            await asyncio.sleep(0.005)
        assert repo._watcher is not None and not wait.done()
        # One watcher task per repository, named for where it looks (task dumps show it).
        assert repo._watcher.get_name() == f"toolfold changes {repo.location}"
        await repo.close()
        with pytest.raises(ClosedError) as info:
            async with asyncio.timeout(GUARD):
                await wait
        assert str(info.value) == f"repository {repo.location} was closed"
    finally:
        wait.cancel()
        await repo.close()
