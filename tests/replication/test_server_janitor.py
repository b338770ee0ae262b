"""The server's orphan janitor (``serve --resume-orphans``) in one process: it settles
expired leases in every session, a session that fails does not keep the others
unsettled, and it runs exactly from the app's startup to its shutdown. (With real
processes: tests/cli/test_cli_serve_orphans.py.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from toolfold.chord import Tracker
from toolfold.durability import (
    CallRecord,
    Durability,
    TrackerSource,
    pending_messages,
    start_message,
)
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


async def test_only_expired_leases_are_settled_beside_unleased_calls_and_messages() -> None:
    # One session holds, besides a dead host's call: a call started without a lease
    # (nothing tells whether its process still runs), a live host's call, and an
    # assistant message being written. The janitor takes the dead host's call only.
    async with open_repository("memory:") as repo:
        await orphan(repo, "mixed")
        session = await repo.open_session("mixed")
        unleased = await Durability(session).start_operation(
            "op-unleased",
            "r",
            [CallRecord("op-unleased", "c-unleased", "echo", "c-u", {}, "r", "t")],
        )
        assert unleased.lease is None
        alive = await Durability(session, host="alive", lease_ttl=3600).start_operation(
            "op-alive", "r", [CallRecord("op-alive", "c-alive", "echo", "c-a", {}, "r", "t")]
        )
        assert alive.lease is not None
        alive.lease.stop_heartbeat()
        message = await start_message(
            session,
            run_id="r",
            turn_id="t",
            message_id="m-writing",
            source=TrackerSource(Tracker({"role": "assistant", "content": []})),
        )
        await session.close()
        janitor = OrphanJanitor(repo, resumer, interval=1)
        [result] = await janitor.sweep()
        assert (result.tool_call_id, result.outcome) == ("c-mixed", "interrupted")
        assert await janitor.sweep() == []
        session = await repo.open_session("mixed")
        left = sorted(s.id for s in await session.live_scopes())
        assert left == sorted(["op-unleased", "op-alive", message.operation_id])
        assert [m.message_id for m in await pending_messages(session)] == ["m-writing"]
        pending = {p.operation_id for p in await Durability(session).pending_operations()}
        assert pending == {"op-unleased", "op-alive"}


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
