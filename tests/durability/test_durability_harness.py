"""Durability wired into the Harness: settlement (one transaction, retirement with the
last call, the fence), resume after a crash (seeded replay of replay-safe tools,
interruption settlement of the others), memos through ``ToolContext``."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from typing import Any

import pytest
from durability_helpers import Clock, SimulatedCrash, Store, Tap
from pydantic import BaseModel

from toolfold.durability import (
    Durability,
    DurabilityError,
    DurableStream,
    operation_call,
    pending_tool_output,
    recover,
)
from toolfold.harness import (
    INTERRUPTION_MARKER,
    MISSING,
    DurableHooks,
    Harness,
    MemoUnavailableError,
    ToolCall,
    ToolContext,
    resume,
    tool,
)
from toolfold.output import OutputPolicy, ToolOutput


class NoParams(BaseModel):
    pass


class Gates:
    """Events a test tool reports to, and waits on (never sleeps)."""

    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.forever = asyncio.Event()  # never set: "the process dies here"


def harness_for(session: Any, tools: list[Any], **kw: Any) -> Harness:
    hooks = DurableHooks(Durability(session, interval=0.0))
    return Harness(tools, hooks=hooks, context=kw.pop("context", None), **kw)


async def crash_during(tap: Tap, run: Any, reached: asyncio.Event) -> None:
    """Let ``run`` go until ``reached``, then 'kill the process': no later storage call
    reaches the store, and the run is abandoned."""
    task = asyncio.ensure_future(run)
    waiter = asyncio.ensure_future(reached.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    assert not task.done(), f"the run ended before the crash point: {task}"
    tap.crash_at = tap.commits + 1
    task.cancel()
    with contextlib.suppress(BaseException):
        await task


def make_stepper(gates: Gates, steps: int, crash_after: int | None) -> Any:
    @tool(params=NoParams, replay_safe=True, output=OutputPolicy(retain="tail", max_bytes=4096))
    async def stepper(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """A replay-safe multi-step tool that memoises each finished step."""
        for i in range(steps):
            if await ctx.get_memo(f"step{i}") is not MISSING:
                continue
            out.write(f"step {i} output\n")
            out.details[f"s{i}"] = i
            out.usage({"input_tokens": 10})
            await ctx.set_memo(f"step{i}", True)
            if crash_after is not None and i == crash_after:
                gates.reached.set()
                await gates.forever.wait()

    return stepper


async def test_run_settles_each_call_and_retires_the_operation(store: Store) -> None:
    session = await store.session()

    @tool(params=NoParams)
    async def hello(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Say hello."""
        out.write(f"hello from {call_id}\n")
        out.details["who"] = call_id

    h = harness_for(session, [hello])
    results = await h.run([ToolCall("c1", "hello"), ToolCall("c2", "hello")], run_id="op1")
    assert [r.text for r in results] == ["hello from c1\n", "hello from c2\n"]
    entries = [e.value for e in await session.read_entries()]
    assert [(e["tool_call_id"], e["is_error"], e["operation_id"]) for e in entries] == [
        ("c1", False, "op1"),
        ("c2", False, "op1"),
    ] or sorted(e["tool_call_id"] for e in entries) == ["c1", "c2"]
    assert await session.live_scopes() == []
    assert await session.read_list(pending_tool_output("op1", "c1")) == []
    # Reopened: the settled history is all that is left.
    session = await store.restart(session)
    assert len(await session.read_entries()) == 2
    assert await session.live_scopes() == []


async def test_replay_safe_tool_resumes_seeded_without_loss_or_duplication(store: Store) -> None:
    inner = await store.session()
    tap = Tap(inner)
    gates = Gates()
    h = harness_for(tap, [make_stepper(gates, steps=4, crash_after=1)])
    await crash_during(tap, h.run([ToolCall("c1", "stepper")], run_id="op1"), gates.reached)

    session = await store.restart(tap)
    assert [s.id for s in await session.live_scopes()] == ["op1"]
    h2 = harness_for(session, [make_stepper(Gates(), steps=4, crash_after=None)])
    results = await resume(h2)
    assert len(results) == 1
    r = results[0]
    assert r.text == "".join(f"step {i} output\n" for i in range(4))
    assert r.details == {"s0": 0, "s1": 1, "s2": 2, "s3": 3}
    assert r.usage == {"input_tokens": 40}  # usage survived the seed, not counted twice
    assert r.is_error is False
    entries = [e.value for e in await session.read_entries()]
    assert [e["tool_call_id"] for e in entries] == ["c1"]
    assert entries[0]["content"][0]["text"] == r.text
    assert await session.live_scopes() == []


async def test_replay_never_deletes_the_checkpoint_first(store: Store) -> None:
    inner = await store.session()
    tap = Tap(inner)
    gates = Gates()
    h = harness_for(tap, [make_stepper(gates, steps=3, crash_after=0)])
    await crash_during(tap, h.run([ToolCall("c1", "stepper")], run_id="op1"), gates.reached)
    session = await store.restart(tap)
    before = await recover(session, pending_tool_output("op1", "c1"))
    assert before is not None and "step 0 output" in before.value["content"][0]["text"]

    # Crash again during the replay, before anything new is committed: the durable
    # state must still hold step 0 (nothing was deleted to "start clean").
    tap2 = Tap(session)
    tap2.crash_at = 1
    h2 = harness_for(tap2, [make_stepper(Gates(), steps=3, crash_after=None)])
    with contextlib.suppress(BaseException):
        await resume(h2)
    session = await store.restart(tap2)
    again = await recover(session, pending_tool_output("op1", "c1"))
    assert again is not None and again.value == before.value
    h3 = harness_for(session, [make_stepper(Gates(), steps=3, crash_after=None)])
    [r] = await resume(h3)
    assert r.text == "step 0 output\nstep 1 output\nstep 2 output\n"


async def test_memoised_spill_is_not_redone_and_keeps_its_path(
    store: Store, tmp_path: Path
) -> None:
    spills = tmp_path / "spill"
    spills.mkdir()

    def make(gates: Gates, crash: bool) -> Any:
        @tool(params=NoParams, replay_safe=True)
        async def spiller(
            call_id: str,
            params: NoParams,
            cancel: asyncio.Event,
            out: ToolOutput,
            ctx: ToolContext,
        ) -> None:
            """Spills its bulk output to a file once, then reports on it."""
            path = await ctx.get_memo("spill")
            if path is MISSING:
                path = str(spills / f"spill-{uuid.uuid4().hex}.log")
                Path(path).write_text("bulk " * 1000)
                out.write(f"spilled to {path}\n")
                await ctx.set_memo("spill", path)
            if crash:
                gates.reached.set()
                await gates.forever.wait()
            out.write(f"summary of {Path(path).name}: {len(Path(path).read_text())} bytes\n")

        return spiller

    inner = await store.session()
    tap = Tap(inner)
    gates = Gates()
    h = harness_for(tap, [make(gates, crash=True)])
    await crash_during(tap, h.run([ToolCall("c1", "spiller")], run_id="op1"), gates.reached)
    session = await store.restart(tap)
    [r] = await resume(harness_for(session, [make(Gates(), crash=False)]))
    files = list(spills.iterdir())
    assert len(files) == 1  # no second spill file
    assert r.text == f"spilled to {files[0]}\nsummary of {files[0].name}: 5000 bytes\n"
    assert r.text.count("spilled to") == 1


async def test_non_replay_safe_tool_is_settled_from_its_checkpoint(store: Store) -> None:
    gates = Gates()

    @tool(params=NoParams, output=OutputPolicy(retain="tail", max_bytes=1000))
    async def deploy(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Not safe to run twice."""
        out.write("uploading...\n" * 3)
        out.details["stage"] = "upload"
        out.usage({"input_tokens": 5, "output_tokens": 7})
        await ctx.set_memo("uploaded", True)  # forces a durable checkpoint
        gates.reached.set()
        await gates.forever.wait()

    ran_again = asyncio.Event()

    @tool(params=NoParams, name="deploy")
    async def deploy_after_restart(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Must not run on resume."""
        ran_again.set()

    inner = await store.session()
    tap = Tap(inner)
    await crash_during(
        tap, harness_for(tap, [deploy]).run([ToolCall("c9", "deploy")], run_id="op1"), gates.reached
    )
    session = await store.restart(tap)
    [r] = await resume(harness_for(session, [deploy_after_restart]))
    assert not ran_again.is_set()
    assert r.text == "uploading...\n" * 3 + INTERRUPTION_MARKER
    assert r.is_error is True and r.outcome == "interrupted"
    assert r.details == {"stage": "upload"}
    assert r.usage == {"input_tokens": 5, "output_tokens": 7}
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["outcome"] == "interrupted" and entry["is_error"] is True
    assert entry["content"][0]["text"].endswith(INTERRUPTION_MARKER)
    assert await session.live_scopes() == []


async def test_an_interrupted_head_tail_call_gets_its_marker_after_the_tail(
    store: Store,
) -> None:
    gates = Gates()
    policy = OutputPolicy(retain="head_tail", max_bytes=4000, max_lines=20)
    lines = "".join(f"uploading part {i}\n" for i in range(300))

    @tool(params=NoParams, output=policy)
    async def deploy(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Not safe to run twice."""
        out.write(lines)
        await ctx.set_memo("uploaded", True)  # forces a durable checkpoint
        gates.reached.set()
        await gates.forever.wait()

    @tool(params=NoParams, name="deploy")
    async def deploy_after_restart(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Must not run on resume."""

    inner = await store.session()
    tap = Tap(inner)
    await crash_during(
        tap, harness_for(tap, [deploy]).run([ToolCall("c9", "deploy")], run_id="op1"), gates.reached
    )
    session = await store.restart(tap)
    [r] = await resume(harness_for(session, [deploy_after_restart]))
    reference = ToolOutput(policy)
    reference.write(lines)
    # The head, the cut marker and the tail as checkpointed, then the marker after all.
    assert r.text == reference.text + INTERRUPTION_MARKER
    assert r.text.startswith(
        "uploading part 0\nuploading part 1\nuploading part 2\nuploading part 3\n[... "
    )
    head, cut, tail = (block["text"] for block in r.content[:3])
    assert head == reference.snapshot()["content"][0]["text"] and cut.startswith("[... ")
    assert tail.endswith("uploading part 299\n" + INTERRUPTION_MARKER)


async def test_settled_calls_are_not_resumed(store: Store) -> None:
    gates = Gates()
    runs: list[str] = []

    def make(block: bool) -> Any:
        @tool(params=NoParams, replay_safe=True)
        async def job(
            call_id: str,
            params: NoParams,
            cancel: asyncio.Event,
            out: ToolOutput,
            ctx: ToolContext,
        ) -> None:
            """Quick for c1, blocks for c2 in the first process."""
            runs.append(call_id)
            out.write(f"{call_id} ran\n")
            if block and call_id == "c2":
                gates.reached.set()
                await gates.forever.wait()

        return job

    inner = await store.session()
    tap = Tap(inner)

    async def settled_c1_then_blocked() -> None:
        await gates.reached.wait()
        while not any(e.value["tool_call_id"] == "c1" for e in await inner.read_entries()):
            await asyncio.sleep(0)  # polling storage state, not timing

    reached = asyncio.Event()

    async def both() -> None:
        await settled_c1_then_blocked()
        reached.set()

    helper = asyncio.ensure_future(both())
    await crash_during(
        tap,
        harness_for(tap, [make(True)]).run(
            [ToolCall("c1", "job"), ToolCall("c2", "job")], run_id="op1"
        ),
        reached,
    )
    await helper
    session = await store.restart(tap)
    runs.clear()
    results = await resume(harness_for(session, [make(False)]))
    assert runs == ["c2"]
    assert [r.tool_call_id for r in results] == ["c2"]
    ids = sorted(e.value["tool_call_id"] for e in await session.read_entries())
    assert ids == ["c1", "c2"]
    assert await session.live_scopes() == []


async def test_crash_before_any_checkpoint_settles_empty_with_marker(store: Store) -> None:
    gates = Gates()

    @tool(params=NoParams)
    async def slow(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Dies before writing anything."""
        gates.reached.set()
        await gates.forever.wait()

    inner = await store.session()
    tap = Tap(inner)
    await crash_during(
        tap, harness_for(tap, [slow]).run([ToolCall("c1", "slow")], run_id="op1"), gates.reached
    )
    session = await store.restart(tap)
    [r] = await resume(harness_for(session, [slow]))
    assert r.text == INTERRUPTION_MARKER and r.outcome == "interrupted"
    assert await session.live_scopes() == []


# -- the fence: late progress cannot recreate pending output --------------------------


async def _late_write_after_settlement(store: Store) -> list[Any]:
    inner = await store.session()
    tap = Tap(inner)
    streams: list[DurableStream] = []
    hooks = DurableHooks(Durability(tap, interval=0.0))
    original = hooks.on_sink_created

    async def spy(call: Any, sink: Any, context: Any) -> Any:
        ctx = await original(call, sink, context)
        streams.append(hooks._calls[(call.run_id, call.tool_call_id)].stream)
        return ctx

    hooks.on_sink_created = spy  # type: ignore[method-assign]

    @tool(params=NoParams)
    async def quick(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Writes a line."""
        out.write("done\n")

    real_commit = tap.commit
    late: list[asyncio.Future[Any]] = []

    async def commit(writes: Any) -> Any:
        if not callable(writes):
            return await real_commit(writes)

        mine: list[asyncio.Future[Any]] = []

        def planned() -> Any:
            ws = writes()
            if not late and any(type(w).__name__ == "RetireScope" for w in ws):
                # Late progress (a recovery base requested by a straggler) queues right
                # behind the settlement on the session line.
                late.append(asyncio.ensure_future(streams[0].force(base=True)))
                mine.append(late[0])
            return ws

        result = await real_commit(planned)
        for f in mine:
            await f
        return result

    tap.commit = commit  # type: ignore[method-assign]
    await Harness([quick], hooks=hooks).run([ToolCall("c1", "quick")], run_id="op1")
    assert late and late[0].done()
    return [s.id for s in await inner.live_scopes()]


async def test_fence_stops_late_progress_from_recreating_pending_output(store: Store) -> None:
    assert await _late_write_after_settlement(store) == []


async def test_without_the_fence_late_progress_recreates_the_scope(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Regression guard: the scenario above really produces a late write.
    monkeypatch.setattr(DurableStream, "fence", lambda self: None)
    assert await _late_write_after_settlement(store) == ["op1"]


async def test_memos_without_durability_say_what_to_do() -> None:
    @tool(params=NoParams)
    async def memo_user(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Uses memos."""
        await ctx.set_memo("x", 1)

    [r] = await Harness([memo_user]).run([ToolCall("c1", "memo_user")])
    assert r.is_error
    assert "memos need a durable session" in r.text
    assert MemoUnavailableError.__name__ in r.text


async def test_call_record_keeps_what_resume_needs(store: Store) -> None:
    session = await store.session()

    @tool(params=NoParams)
    async def noop(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Checks its own call record while running."""
        rec = await session.get_value(operation_call("op1", call_id))
        out.write(repr(sorted(rec.items())))

    [r] = await harness_for(session, [noop]).run(
        [ToolCall("c1", "noop", {})], run_id="op1", turn_id="t7"
    )
    assert "('tool_name', 'noop')" in r.text and "('turn_id', 't7')" in r.text
    assert "('args', {})" in r.text and "('run_id', 'op1')" in r.text


async def test_resume_needs_durable_hooks() -> None:
    with pytest.raises(DurabilityError, match=r"resume\(\) needs a Harness with durability"):
        await resume(Harness([]))


async def test_harness_session_argument_and_resume_method(store: Store) -> None:
    inner = await store.session()
    tap = Tap(inner)
    gates = Gates()
    h = Harness([make_stepper(gates, steps=3, crash_after=1)], session=tap)
    assert isinstance(h.hooks, DurableHooks)
    await crash_during(tap, h.run([ToolCall("c1", "stepper")], run_id="op1"), gates.reached)
    session = await store.restart(tap)
    h2 = Harness([make_stepper(Gates(), steps=3, crash_after=None)], session=session)
    [r] = await h2.resume()
    assert r.text == "step 0 output\nstep 1 output\nstep 2 output\n"
    assert await h2.resume() == []  # nothing left


async def test_session_and_hooks_together_are_refused() -> None:
    from toolfold.harness import ExecutionHooks, ToolDefinitionError
    from toolfold.storage import MemoryRepository

    session = await MemoryRepository().open_session("s", create=True)
    with pytest.raises(ToolDefinitionError, match=r"pass either session= .* or hooks=, not both"):
        Harness([], session=session, hooks=ExecutionHooks())


def test_durable_names_are_re_exported_by_the_harness_from_the_durability_layer() -> None:
    import toolfold.durability as durability
    import toolfold.harness as harness

    for name in [
        "Durability",
        "DurableStream",
        "TrackerSource",
        "recover",
        "pending_tool_output",
        "pending_assistant_output",
        "operation_tool_memo",
        "DurabilityError",
        "RecoveryError",
        "MemoError",
        "MISSING",
    ]:
        assert name in harness.__all__
        assert getattr(harness, name) is getattr(durability, name)
        module = getattr(getattr(harness, name), "__module__", "toolfold.durability._memos")
        assert module.startswith("toolfold.durability."), (name, module)
    for name in ["DurableHooks", "resume"]:
        assert getattr(harness, name).__module__ == "toolfold.harness._durable_hooks"
    # The durability layer sits below the harness: its errors have their own root.
    assert issubclass(harness.MemoError, durability.DurabilityError)
    assert not issubclass(harness.DurabilityError, harness.HarnessError)


async def test_bad_memo_value_fails_clearly_and_loses_nothing(store: Store) -> None:
    @tool(params=NoParams, replay_safe=True)
    async def bad_memo(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Memoises something that is not JSON."""
        out.write("kept 1\n")
        await ctx.set_memo("good", [1, 2])
        out.write("kept 2\n")
        await ctx.set_memo("bad", {1, 2})  # a set is not JSON

    session = await store.session()
    [r] = await harness_for(session, [bad_memo]).run([ToolCall("c1", "bad_memo")], run_id="op1")
    assert r.is_error
    assert r.text.startswith("kept 1\nkept 2\n")
    assert "InvalidValueError" in r.text and "set" in r.text
    [entry] = [e.value for e in await session.read_entries()]
    assert entry["content"][0]["text"] == r.text
    assert await session.live_scopes() == []


class MultiParams(BaseModel):
    steps: int
    parts: int


@tool(params=MultiParams, replay_safe=True)
async def multi(
    call_id: str, params: MultiParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """Several steps of several parts, each step memoised once its parts are written."""
    for i in range(params.steps):
        if await ctx.get_memo(f"s{i}") is not MISSING:
            continue
        for j in range(params.parts):
            out.write(f"{i}.{j} ")
            await asyncio.sleep(0)  # a yield, so paced checkpoints interleave
        out.details.setdefault("done", []).append(i)
        await ctx.set_memo(f"s{i}", i)


@pytest.mark.parametrize("steps", [1, 2, 3, 4])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_crash_at_any_commit_then_resume_is_exact(steps: int, parts: int) -> None:
    """Every case, not a sample: each shape crashes at each of its first 45 commits (more than
    the largest shape makes, so the last few cases run to completion uncrashed)."""
    from toolfold.storage import MemoryRepository

    async def scenario(crash: int) -> None:
        repo = MemoryRepository()
        session = await repo.open_session("s", create=True)
        tap = Tap(session)
        tap.crash_at = crash
        call = ToolCall("c1", "multi", {"steps": steps, "parts": parts})
        with contextlib.suppress(BaseException):
            await harness_for(tap, [multi]).run([call], run_id="op1")
        started = tap.commits > 1 or crash > 1
        await session.close()
        session = await repo.open_session("s")
        results = await Harness([multi], session=session).resume()
        entries = [e.value for e in await session.read_entries()]
        if not started:
            assert entries == [] and results == []
            return
        want = "".join(f"{i}.{j} " for i in range(steps) for j in range(parts))
        [entry] = entries
        assert entry["content"][0]["text"] == want
        assert entry["details"] == {"done": list(range(steps))}
        assert entry["is_error"] is False
        assert await session.live_scopes() == []

    for crash in range(1, 46):
        asyncio.run(scenario(crash))


async def test_crash_while_settling_an_interrupted_call_adds_one_marker(store: Store) -> None:
    gates = Gates()

    @tool(params=NoParams)
    async def once(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Not replay-safe; dies after a checkpoint."""
        out.write("half done\n")
        await ctx.set_memo("cp", True)
        gates.reached.set()
        await gates.forever.wait()

    inner = await store.session()
    tap = Tap(inner)
    await crash_during(
        tap, harness_for(tap, [once]).run([ToolCall("c1", "once")], run_id="op1"), gates.reached
    )
    # Resume, but die again before the settlement commits (the resumer's lease then
    # has to expire before the next one may take the call over).
    session = await store.restart(tap)
    tap2 = Tap(session)
    real = tap2.commit
    clock = Clock()
    died: list[str] = []

    async def no_settlement(writes: Any, **kw: Any) -> Any:
        if callable(writes):
            ws = writes()
            if any(type(w).__name__ == "AppendEntry" for w in ws):
                died.append("before the settlement")
                raise SimulatedCrash("before the settlement")
            return await real(ws, **kw)
        return await real(writes, **kw)

    tap2.commit = no_settlement  # type: ignore[method-assign]
    first = Durability(tap2, interval=0.0, host="resumer-1", wall_clock=clock)  # type: ignore[arg-type]
    with contextlib.suppress(BaseException):
        await resume(Harness([once], hooks=DurableHooks(first)))
    assert died == ["before the settlement"]  # it took the call over, then died there
    session = await store.restart(tap2)
    clock.now += 11
    second = Durability(session, interval=0.0, host="resumer-2", wall_clock=clock)
    [r] = await resume(Harness([once], hooks=DurableHooks(second)))
    assert r.text == "half done\n" + INTERRUPTION_MARKER
    assert r.text.count(INTERRUPTION_MARKER) == 1


async def test_a_call_outside_a_run_is_not_durable_and_says_so(store: Store) -> None:
    from toolfold.harness import EventBus, execute_tool_call

    @tool(params=NoParams)
    async def memo_user(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Uses memos."""
        out.write("before\n")
        await ctx.set_memo("x", 1)

    session = await store.session()
    hooks = DurableHooks(Durability(session, interval=0.0))
    r = await execute_tool_call(
        memo_user, "c1", {}, run_id="r", turn_id="t", bus=EventBus(), hooks=hooks
    )
    assert r.is_error and r.text.startswith("before\nMemoUnavailableError: ")
    assert await session.live_scopes() == []
    assert await session.read_entries() == []


async def test_operation_misuse_is_refused_with_what_to_do(store: Store) -> None:
    from toolfold.durability import CallRecord

    session = await store.session()
    d = Durability(session)
    rec = CallRecord("opA", "c1", "t", "c1", {}, "opA", "turn")
    with pytest.raises(DurabilityError, match="call 'c1' names operation 'opA', not 'opB'"):
        await d.start_operation("opB", "opB", [rec])
    assert await session.live_scopes() == []  # nothing half-recorded
    op = await d.start_operation("opA", "opA", [rec])
    out = ToolOutput()
    with pytest.raises(DurabilityError, match="invocation 'zz' is not part of operation 'opA'"):
        op.invocation("zz", out.open_stream())
    await op.settle("c1", {"tool_call_id": "c1", "operation_id": "opA"})
    with pytest.raises(DurabilityError, match="'c1' of operation 'opA' is already settled"):
        await op.settle("c1", {"tool_call_id": "c1", "operation_id": "opA"})
    assert len(await session.read_entries()) == 1
    assert await session.live_scopes() == []


async def test_interrupted_settlement_keeps_the_checkpoint_text_exactly(store: Store) -> None:
    from toolfold.durability import CallRecord
    from toolfold.storage import append_list

    @tool(params=NoParams, output=OutputPolicy(retain="tail", max_bytes=1000, max_lines=2))
    async def shell(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Not replay-safe."""

    session = await store.session()
    d = Durability(session)
    await d.start_operation("op1", "op1", [CallRecord("op1", "c1", "shell", "c1", {}, "op1", "t")])
    # A bash-like state: two retained lines (source-owned totals) plus a footer line the
    # tool wrote after the window — more lines than the policy would re-window to.
    state = ToolOutput(shell.output).snapshot()
    state["content"][0]["text"] = "line 9\nline 10\n[Showing lines 9-10 of 10. Full output: /x]"
    await session.commit(
        [append_list(pending_tool_output("op1", "c1"), [["r", state]], tag="base")]
    )
    h = Harness([shell], session=session)
    events: list[Any] = []
    h.bus.add_listener(events.append)
    [r] = await h.resume()
    assert r.text == state["content"][0]["text"] + "\n" + INTERRUPTION_MARKER
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["RunStart", "ToolStart", "ToolUpdate", "ToolEnd", "ToolSettled", "RunEnd"]
    assert events[2].ops[0][0] == "r"
    assert await session.live_scopes() == []
