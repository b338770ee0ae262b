"""The server's reads of a stored session never lock, repair or write the store."""

from __future__ import annotations

from pathlib import Path

from toolfold.server._sessions import SessionPool
from toolfold.storage import append_entry
from toolfold.storage._jsonl import JsonlRepository


async def test_a_read_through_the_pool_leaves_a_torn_tail_and_takes_no_lock(
    tmp_path: Path,
) -> None:
    repo = JsonlRepository(tmp_path)
    try:
        s = await repo.open_session("main", create=True)
        await s.commit([append_entry("one")])
        await s.close()
        main = tmp_path / "main.jsonl"
        torn = main.read_bytes() + b'["00000000",["e",2,"ha'
        main.write_bytes(torn)
        pool = SessionPool(repo)
        async with pool.use("main") as reader:
            assert reader.read_only
            assert [e.value for e in await reader.read_entries()] == ["one"]
            assert main.read_bytes() == torn  # not repaired by a read
            # A command may start meanwhile: the reader holds no lock against it.
            async with pool.use("main", create=True) as writer:
                assert not writer.read_only and len(writer.notes) == 1
                await writer.commit([append_entry("two")])
                # Readers that come while the command runs share its session.
                async with pool.use("main") as shared:
                    assert shared is writer
        assert pool.open_sessions == []
    finally:
        await repo.close()
    reopened = JsonlRepository(tmp_path, read_only=True)
    try:
        s = await reopened.open_session("main")
        assert [e.value for e in await s.read_entries()] == ["one", "two"]
    finally:
        await reopened.close()
