"""``SessionFollower`` over real stores: a second repository on the same SQLite file or
PostgreSQL database follows a durable call another repository runs, checkpoint by
checkpoint, and its lane ends equal to a lane fed by the running harness itself."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolfold.harness import Harness, ToolCall, tool
from toolfold.harness._lane import Lanes, new_lane_view, reduce_lane_snapshot
from toolfold.history import SessionFollower
from toolfold.output import OutputPolicy
from toolfold.storage import open_repository

LANE = "s"


class _Params(BaseModel):
    pass


def _gated_tool(gates: list[asyncio.Event]) -> Any:
    @tool(params=_Params, name="steps", output=OutputPolicy(max_lines=5))
    async def steps(
        tool_call_id: str, params: _Params, cancel: Any, out: Any, context: Any
    ) -> None:
        """Writes a few lines per gate into a 5-line tail window."""
        for n, gate in enumerate(gates):
            for i in range(4):
                out.write(f"step {n} line {i} 漢字\n")
            out.details["step"] = n
            await gate.wait()

    return steps


async def _follow(url: str) -> None:
    writer_repo, reader_repo = open_repository(url), open_repository(url)
    try:
        writer = await writer_repo.create_session("s")
        reader = await reader_repo.open_session("s")
        gates = [asyncio.Event() for _ in range(3)]
        harness = Harness([_gated_tool(gates)], lane=LANE, session=writer)
        direct = Lanes()
        harness.bus.add_listener(direct.handle)
        follower = SessionFollower(reader, LANE)
        followed = new_lane_view(LANE)
        run = asyncio.create_task(harness.run([ToolCall("c1", "steps", {})], run_id="r1"))

        async def poll_until(what: str, ok: Any) -> None:
            for _ in range(500):
                for event in await follower.poll():
                    reduce_lane_snapshot(followed, event)
                if ok():
                    return
                await asyncio.sleep(0.02)
            raise AssertionError(f"the follower never saw {what}: {followed!r:.400}")

        def text() -> str:
            tool_entry = followed["tools"].get("c1")
            if not tool_entry or not tool_entry["output"]:
                return ""
            value: str = tool_entry["output"]["content"][0]["text"]
            return value

        try:
            for n, gate in enumerate(gates):
                # Each step's lines reach the follower from the store while the call runs.
                await poll_until(f"step {n}", lambda n=n: f"step {n} line 3" in text())
                assert followed["tools"]["c1"]["status"] == "running"
                assert followed["operation"] == {"run_id": "r1", "status": "running"}
                gate.set()
            await asyncio.wait_for(run, 30)
            await poll_until("the settlement", lambda: bool(followed["transcript"]))
            await poll_until("the run's end", lambda: followed["operation"]["status"] == "done")
        finally:
            for gate in gates:
                gate.set()
            if not run.done():
                run.cancel()
        view = direct.host(LANE).view
        assert {k: v for k, v in followed.items() if k != "transcript"} == {
            k: v for k, v in view.items() if k != "transcript"
        }
        # The stored entry also names its operation, run and turn (durability adds them).
        [stored], [live] = followed["transcript"], view["transcript"]
        assert {k: stored[k] for k in live} == live
        assert followed["tools"]["c1"]["status"] == "ok"
        assert followed["transcript"][0]["output_ref"] == ["tools", "c1", "output"]
        # Nothing new: a poll is quiet.
        assert await follower.poll() == []
    finally:
        await writer_repo.close()
        await reader_repo.close()


async def test_a_second_repository_follows_a_running_call_on_sqlite(tmp_path: Path) -> None:
    await _follow(f"sqlite:{tmp_path / 'toolfold.db'}")


@pytest.mark.usefixtures("postgres_url")
async def test_a_second_repository_follows_a_running_call_on_postgresql(postgres_url: str) -> None:
    await _follow(postgres_url)


async def test_a_lane_dropped_while_idle_and_made_again_is_followed_again(tmp_path: Path) -> None:
    from toolfold.server._follow import Followers
    from toolfold.server._sessions import SessionPool

    url = f"sqlite:{tmp_path / 'toolfold.db'}"
    writer_repo, reader_repo = open_repository(url), open_repository(url)
    lanes = Lanes()
    followers = Followers(SessionPool(reader_repo), lanes)
    try:
        writer = await writer_repo.create_session(LANE)
        followers.ensure(LANE)
        first = lanes.host(LANE)
        assert lanes.discard(LANE)  # idle: no subscriber, nothing running
        followers.ensure(LANE)  # a new GET: a new host, and a follower for it
        second = lanes.host(LANE)
        assert second is not first and followers.following == [LANE]
        watcher = second.subscribe()  # a follower stops after a while without subscribers
        gates = [asyncio.Event()]
        harness = Harness([_gated_tool(gates)], lane=LANE, session=writer)
        run = asyncio.create_task(harness.run([ToolCall("c1", "steps", {})], run_id="r1"))
        try:
            for _ in range(500):
                tool_entry = second.view["tools"].get("c1")
                output = tool_entry["output"] if tool_entry else None
                if output and "step 0 line 3" in output["content"][0]["text"]:
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError(f"the new lane never saw the running call: {second.view}")
            assert second.view["tools"]["c1"]["status"] == "running"
            gates[0].set()
            await asyncio.wait_for(run, 30)
        finally:
            gates[0].set()
            if not run.done():
                run.cancel()
        watcher.close()
    finally:
        await followers.aclose()
        await writer_repo.close()
        await reader_repo.close()


async def test_a_follower_reads_its_session_only_when_the_store_says_it_moved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolfold.server._follow import Followers
    from toolfold.server._sessions import SessionPool
    from toolfold.storage import append_entry

    polls: list[str] = []
    real_poll = SessionFollower.poll

    async def counted(self: SessionFollower) -> Any:
        polls.append(self.lane)
        return await real_poll(self)

    monkeypatch.setattr(SessionFollower, "poll", counted)
    url = f"sqlite:{tmp_path / 'toolfold.db'}"
    writer_repo, reader_repo = open_repository(url), open_repository(url)
    lanes = Lanes()
    # No backstop read and no idle stop within the test: every read is a wake-up.
    followers = Followers(SessionPool(reader_repo), lanes, safety_poll=3600, idle=3600)

    async def until(what: str, ok: Any) -> None:
        for _ in range(1000):
            if ok():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never {what}: {polls}")

    try:
        followed = await writer_repo.create_session(LANE)
        other = await writer_repo.create_session("other")
        watcher = lanes.host(LANE).subscribe()
        followers.ensure(LANE)
        await until("the first read", lambda: len(polls) == 1)
        for n in range(3):
            # Another session's commit moves data_version; the probe waiting on it
            # wakes only after the watcher looked, so the follower saw it too.
            probe = asyncio.create_task(reader_repo.wait_for_change("other", n))
            await other.commit([append_entry(n)])
            async with asyncio.timeout(30):
                await probe
            assert polls == [LANE]
        await followed.commit([append_entry("news")])
        await until("a read after the commit", lambda: len(polls) == 2)
        watcher.close()
    finally:
        await followers.aclose()
        await writer_repo.close()
        await reader_repo.close()
