"""Every adapter, end to end on its framework's offline model: the bounded result and
its spill file, errors, the loop contract (terminate, add_tools, usage), live ops,
durability and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from integrations_helpers import FRAMEWORKS, TEST_TOOLS, Gate, drive

from toolfold.chord import Decoder, apply
from toolfold.execenv import LocalExecEnv
from toolfold.harness import INTERRUPTION_MARKER, EventBus, Lanes, ToolContext, ToolUpdate
from toolfold.integrations import ToolLoop, ToolNotAvailableError
from toolfold.storage import MemoryRepository
from toolfold.tools import builtin_tools

pytestmark = pytest.mark.parametrize("framework", FRAMEWORKS)


def make_loop(tmp_path: Path, **kwargs: Any) -> ToolLoop:
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    return ToolLoop([*builtin_tools(), *TEST_TOOLS], context=context, **kwargs)


async def test_one_megabyte_of_bash_reaches_the_model_bounded_and_the_spill_is_exact(
    framework: str, tmp_path: Path
) -> None:
    big = b"".join(
        b"line %06d of the build log, padded to be long enough\n" % i for i in range(19000)
    )
    assert len(big) > 1_000_000
    (tmp_path / "big.txt").write_bytes(big)
    loop = make_loop(tmp_path)
    t = await drive(framework, loop, [[("c1", "bash", {"command": "cat big.txt"})], "done"])
    [result] = loop.results
    seen = t.seen["c1"]
    assert seen == result.text  # what the model got is the settled result, unchanged
    assert len(seen.encode()) < 60 * 1024  # the 50 KB window plus the footer
    assert seen.startswith("line 01") or "line 018999" in seen
    assert "line 018999 of the build log" in seen  # the tail is kept
    assert "Full output:" in seen
    spill = result.state["spill_path"] if result.state else None
    assert isinstance(spill, str) and spill in seen
    assert Path(spill).read_bytes() == big
    assert t.final == "done"


async def test_a_raising_tool_is_an_error_result_the_loop_goes_on_and_output_is_kept(
    framework: str, tmp_path: Path
) -> None:
    loop = make_loop(tmp_path)
    t = await drive(framework, loop, [[("c1", "flaky", {})], "recovered"])
    seen = t.seen["c1"]
    assert seen.startswith("partial before failure\n") and "disk on fire" in seen
    if framework != "openai_agents":  # the Agents SDK has no error flag: a string result
        assert t.errors["c1"] is True
    assert t.final == "recovered"
    assert loop.results[0].is_error and loop.results[0].text == seen


async def test_terminate_ends_the_run_after_the_tool_batch(framework: str, tmp_path: Path) -> None:
    loop = make_loop(tmp_path)
    t = await drive(
        framework,
        loop,
        [[("c1", "finish", {}), ("c2", "spend", {})], "the model is never asked again"],
    )
    assert t.turns == 1
    assert loop.terminated
    assert sorted(r.tool_call_id for r in loop.results) == ["c1", "c2"]  # the batch ran
    if framework == "openai_agents":
        assert t.final == "finished the job\n"  # stop at this tool's result
    else:
        assert t.final is None or t.final == ""


async def test_add_tools_exposes_the_tool_on_the_next_turn(framework: str, tmp_path: Path) -> None:
    loop = make_loop(tmp_path, active=["opener"])
    t = await drive(framework, loop, [[("c1", "opener", {})], [("c2", "secret", {})], "done"])
    assert t.offered[0] == ["opener"]
    assert "secret" in t.offered[1]
    assert t.seen["c2"] == "the secret is 42\n"
    assert t.final == "done"


async def test_add_tools_naming_an_unknown_tool_is_an_error_at_call_time(
    framework: str, tmp_path: Path
) -> None:
    loop = make_loop(tmp_path, active=["bad_opener"])
    t = await drive(framework, loop, [[("c1", "bad_opener", {})], "done"])
    assert "add_tools named unknown tool(s) 'nope'" in t.seen["c1"]
    assert t.seen["c1"].startswith("trying\n")
    assert loop.results[0].is_error
    assert loop.active == ["bad_opener"]
    assert t.offered[1] == ["bad_opener"]


async def test_usage_is_summed_per_run_next_to_the_framework_usage(
    framework: str, tmp_path: Path
) -> None:
    loop = make_loop(tmp_path)
    t = await drive(
        framework, loop, [[("c1", "spend", {}), ("c2", "spend", {})], [("c3", "spend", {})], "done"]
    )
    assert loop.usage == {"input_tokens": 21, "output_tokens": 9, "cost": 0.75}
    if framework != "langgraph":  # LangGraph keeps usage on each AIMessage, not per run
        assert t.framework_usage.requests == 3


async def test_a_lane_subscriber_folds_exactly_what_the_model_got(
    framework: str, tmp_path: Path
) -> None:
    bus = EventBus()
    folds: dict[str, Any] = {}

    def fold(event: Any) -> None:
        if isinstance(event, ToolUpdate):
            folds[event.tool_call_id] = apply(folds.get(event.tool_call_id), event.ops)

    bus.add_listener(fold)
    lanes = Lanes()
    bus.add_listener(lanes.handle)
    subscription = lanes.host("agent").subscribe()
    replica: Any = None
    decoder = Decoder()
    loop = make_loop(tmp_path, bus=bus, lane="agent")
    script = [
        [("c1", "bash", {"command": "seq 1 30000"}), ("c2", "flaky", {})],
        [("c3", "spend", {})],
        "done",
    ]
    t = await drive(framework, loop, script)
    while (batch := subscription.next_nowait()) is not None:
        replica = apply(replica, decoder.decode(json.loads(batch.data)))
    assert set(t.seen) == {"c1", "c2", "c3"}
    for call_id, seen in t.seen.items():
        assert folds[call_id]["content"][0]["text"] == seen  # the bus's op batches
        lane_tool = replica["tools"][call_id]  # the lane's replica, over the wire codec
        assert lane_tool["output"]["content"][0]["text"] == seen
        assert lane_tool["status"] == ("error" if call_id == "c2" else "ok")
    assert replica["operation"] == {"run_id": loop.run_id, "status": "done"}


async def test_with_a_session_every_call_settles_durably(framework: str, tmp_path: Path) -> None:
    session = await MemoryRepository().open_session("s", create=True)
    loop = make_loop(tmp_path, session=session)
    t = await drive(
        framework,
        loop,
        [[("c1", "bash", {"command": "echo durable"}), ("c2", "flaky", {})], "done"],
    )
    entries = {e.value["tool_call_id"]: e.value for e in await session.read_entries()}
    assert entries["c1"]["content"][0]["text"] == t.seen["c1"] == "durable\n"
    assert entries["c2"]["is_error"] and entries["c2"]["content"][0]["text"] == t.seen["c2"]
    assert {e["run_id"] for e in entries.values()} == {loop.run_id}
    assert await session.live_scopes() == []


async def test_cancelling_the_run_cancels_the_call_and_keeps_its_partial_output(
    framework: str, tmp_path: Path
) -> None:
    session = await MemoryRepository().open_session("s", create=True)
    loop = make_loop(tmp_path, session=session)
    Gate.reached = asyncio.Event()
    try:
        task = asyncio.ensure_future(drive(framework, loop, [[("c1", "hang", {})], "never"]))
        waiter = asyncio.ensure_future(Gate.reached.wait())
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        assert not task.done(), task
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        Gate.reached = None
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["outcome"] == "interrupted"
    assert entry["content"][0]["text"] == "partial before the stop\n" + INTERRUPTION_MARKER
    assert await session.live_scopes() == []


def test_a_loop_refuses_unknown_active_tools(framework: str, tmp_path: Path) -> None:
    with pytest.raises(ToolNotAvailableError, match="unknown tool 'nope'; the loop's tools are"):
        make_loop(tmp_path, active=["bash", "nope"])
