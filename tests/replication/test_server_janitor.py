"""The server's orphan janitor (``serve --resume-orphans``) in one process: it settles
expired leases in every session, a session that fails does not keep the others
unsettled, and it runs exactly from the app's startup to its shutdown. (With real
processes: tests/cli/test_cli_serve_orphans.py.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from toolfold.durability import CallRecord, Durability
from toolfold.harness import DurableHooks, Harness
from toolfold.server import OrphanJanitor, create_app
from toolfold.storage import Repository, Session, open_repository

POLLS = 400


async def orphan(repo: Repository, name: str) -> None:
    """Session ``name`` holding one call of a host that died: its lease expired long ago."""
    session = await repo.open_session(name, create=True)
    op = await Durability(
        session, host="dead", lease_ttl=5, wall_clock=lambda: 0.0
    ).start_operation(
        "op", "op", [CallRecord("op", f"c-{name}", "echo", f"c-{name}", {}, "op", "t")]
    )
    assert op.lease is not None
    op.lease.stop_heartbeat()
    await session.close()


def resumer(name: str, session: Session) -> Harness:
    if name == "bad":
        raise RuntimeError("cannot build a harness for this session")
    return Harness([], hooks=DurableHooks(Durability(session, host="janitor")))


async def test_one_failing_session_does_not_keep_the_others_unsettled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_repository("memory:") as repo:
        await orphan(repo, "bad")
        await orphan(repo, "good")
        await (await repo.create_session("quiet")).close()  # nothing pending there
        reported: list[tuple[str, list[str]]] = []
        janitor = OrphanJanitor(
            repo,
            resumer,
            interval=0.05,
            on_results=lambda name, rs: reported.append((name, [r.tool_call_id for r in rs])),
        )
        with caplog.at_level(logging.WARNING, logger="toolfold.server"):
            [result] = await janitor.sweep()
        assert result.tool_call_id == "c-good" and result.outcome == "interrupted"
        assert reported == [("good", ["c-good"])]
        assert "resuming orphaned calls of session 'bad' failed" in caplog.text
        assert await janitor.sweep() == []  # settled once; "bad" still fails, still logged
        session = await repo.open_session("bad")
        assert [s.id for s in await session.live_scopes()] == ["op"]


def test_the_janitor_needs_a_positive_interval() -> None:
    with pytest.raises(ValueError, match="interval > 0 seconds, got 0"):
        OrphanJanitor(open_repository("memory:"), resumer, interval=0)


async def test_the_app_runs_the_janitor_from_startup_to_shutdown() -> None:
    async with open_repository("memory:") as repo:
        await orphan(repo, "good")
        janitor = OrphanJanitor(repo, resumer, interval=0.01)
        app = create_app(repository=repo, janitor=janitor)
        async with app.router.lifespan_context(app):
            for _ in range(POLLS):
                if janitor.rounds >= 2:
                    break
                await asyncio.sleep(0.01)
            assert janitor.rounds >= 2
            assert sweeping()
        assert not sweeping()  # shutdown cancelled it and waited for it
        session = await repo.open_session("good")
        assert await session.live_scopes() == []  # the orphan was settled


def sweeping() -> bool:
    """Whether a janitor task is running on this loop."""
    return any(
        getattr(t.get_coro(), "__qualname__", "") == "OrphanJanitor.run"
        for t in asyncio.all_tasks()
        if not t.done()
    )
