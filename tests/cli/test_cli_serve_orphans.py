"""``toolfold serve --resume-orphans``: a ``toolfold run`` killed with ``kill -9`` mid-call
is settled by a ``serve`` on the same store (at once: its lease names a process of this
machine that is gone), and so is a run stopped with ``SIGSTOP`` once its lease expired
(what a dead host on another machine looks like) — on PostgreSQL and on SQLite — while
a live run beside them, whose lease keeps being renewed, is left alone. Real processes throughout; every wait is a
bounded poll on the store or the server."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from cli_helpers import AUTH, LineReader, serve, start, toolfold, wait_for

from toolfold.durability import Durability
from toolfold.harness import INTERRUPTION_MARKER
from toolfold.history import CallView, list_calls
from toolfold.storage import StorageError, open_repository

LEASE = "1"


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:{tmp_path / 'toolfold.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def calls(url: str, session: str) -> list[CallView]:
    """The session's calls as stored now (empty while the session does not exist)."""

    async def read() -> list[CallView]:
        async with open_repository(url) as repo:
            try:
                s = await repo.open_session(session, read_only=True)
            except StorageError:
                return []
            try:
                return await list_calls(s)
            finally:
                await s.close()

    return asyncio.run(read())


def heartbeats(url: str, session: str) -> set[float]:
    """The heartbeat times of the session's live leases."""

    async def read() -> set[float]:
        async with open_repository(url) as repo:
            s = await repo.open_session(session, read_only=True)
            try:
                pending = await Durability(s).pending_operations()
            finally:
                await s.close()
        return {p.lease.heartbeat for p in pending if p.lease is not None}

    return asyncio.run(read())


def pending_shows(url: str, session: str, text: str) -> bool:
    """Whether the session holds an unsettled call whose checkpoint shows ``text``."""
    from cli_helpers import pending_text

    return text in (pending_text(url, session) or "")


def gated(gate: Path, first: str) -> str:
    return f"echo {first}; while [ ! -e {gate} ]; do sleep 0.05; done; echo after-gate"


def test_serve_resume_orphans_settles_a_killed_run_and_leaves_a_live_one(
    store_url: str, tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    gate = tmp_path / "gate"
    try:
        server, base = serve(store_url, tmp_path, "--resume-orphans", "--lease", LEASE)
        procs.append(server)
        errors = LineReader(server.stderr)
        live = start(
            "run", "--store", store_url, "--session", "live", "--lease", LEASE, "--",
            gated(gate, "live-started"), cwd=tmp_path,
        )  # fmt: skip
        procs.append(live)
        doomed = start(
            "run", "--store", store_url, "--session", "doomed", "--lease", LEASE, "--",
            gated(gate, "doomed-started"), cwd=tmp_path,
        )  # fmt: skip
        procs.append(doomed)
        stalled = start(
            "run", "--store", store_url, "--session", "stalled", "--lease", LEASE, "--",
            gated(gate, "stalled-started"), cwd=tmp_path,
        )  # fmt: skip
        procs.append(stalled)
        for name, proc in (("live", live), ("doomed", doomed), ("stalled", stalled)):
            wait_for(
                lambda name=name: pending_shows(store_url, name, f"{name}-started"),
                f"the run in session {name}",
                proc=proc,
            )
        os.killpg(doomed.pid, signal.SIGKILL)  # kill -9 mid-call: no cleanup, no settlement
        doomed.wait(timeout=30)
        # A stopped process still exists: only its lease running out tells the janitor
        # (as for a host on another machine, paused or cut off).
        os.kill(stalled.pid, signal.SIGSTOP)

        for name in ("doomed", "stalled"):

            def settled(name: str = name) -> CallView | None:
                found = calls(store_url, name)
                return found[0] if found and found[0].settled else None

            try:
                call = wait_for(settled, f"serve to settle the call of {name}", proc=server)
            except AssertionError as exc:  # say what serve printed meanwhile
                raise AssertionError(f"{exc}; serve's stderr: {errors.text()[-2000:]!r}") from None
            assert call.status == "interrupted" and call.message is not None
            text = call.message["content"][0]["text"]
            assert text.startswith(f"{name}-started\n") and INTERRUPTION_MARKER in text
            assert "after-gate" not in text
            assert len(calls(store_url, name)) == 1  # settled once
            report = f"of session {name} left by a dead process"
            wait_for(lambda report=report: errors.has(report), "the report")
        os.killpg(stalled.pid, signal.SIGKILL)
        stalled.wait(timeout=30)

        # Meanwhile the live run's lease was renewed past several lease lengths (three
        # new heartbeats, ttl / 3 apart) while the janitor looked every ttl / 2: the
        # janitor left it alone, and it finishes as it would have without a janitor.
        seen: set[float] = set()

        def renewed() -> bool:
            seen.update(heartbeats(store_url, "live"))
            return len(seen) >= 4

        wait_for(renewed, "the live run to renew its lease", proc=live)
        [running] = calls(store_url, "live")
        assert not running.settled
        gate.write_text("go")
        out, err = live.communicate(timeout=60)
        assert live.returncode == 0, err
        assert out.decode() == "live-started\nafter-gate\n"
        [done] = calls(store_url, "live")
        assert done.status == "ok"
        r = httpx.get(f"{base}/v1/sessions/doomed/calls", headers=AUTH, timeout=5)
        assert r.status_code == 200 and r.json()["calls"][0]["status"] == "interrupted"
        os.kill(server.pid, signal.SIGINT)  # the janitor stops with the server
        server.wait(timeout=30)
        assert server.returncode == 0, errors.text()
        assert "Traceback" not in errors.text()
    finally:
        gate.write_text("go")  # ends the killed run's orphaned command whatever happened
    # Nothing is left for `toolfold resume`.
    for name in ("doomed", "stalled", "live"):
        resumed = toolfold("resume", name, "--store", store_url, cwd=tmp_path)
        assert "nothing to resume" in resumed.stdout, resumed.stderr


def test_serve_lease_needs_resume_orphans_and_a_sane_length(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'toolfold.db'}"
    lone = toolfold("serve", "--store", url, "--lease", "5", cwd=tmp_path)
    assert lone.returncode == 2 and "--lease applies to --resume-orphans" in lone.stderr
    for args in (("serve", "--resume-orphans"), ("run", "--", "true")):
        bad = toolfold(*args[:1], "--store", url, "--lease", "0", *args[1:], cwd=tmp_path)
        assert bad.returncode == 2, bad.stderr
        assert "--lease must be between 0.5 and 3600 seconds, got 0;" in bad.stderr
    assert not (tmp_path / "toolfold.db").exists()  # refused before anything was opened
