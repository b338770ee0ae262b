"""The output of a background command is a call of its own: live on the bus after the
starting call settled, checkpointed into the store while it runs, settled when the
command ends, and left out of what a model is shown."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel

from toolfold.agent._history import rebuild_history
from toolfold.chord import apply
from toolfold.durability import Durability, pending_tool_output, recover
from toolfold.execenv import LocalExecEnv
from toolfold.harness import (
    INTERRUPTION_MARKER,
    Harness,
    HarnessEvent,
    ToolCall,
    ToolContext,
    ToolSettled,
    ToolStart,
    ToolUpdate,
    background_settled,
    tool,
)
from toolfold.output import ToolOutput
from toolfold.storage import Repository, Session, open_repository
from toolfold.tools import BASH
from toolfold.tools.bash_background import BASH_READ, BASH_STOP

PY = sys.executable
BOUND = 60


@pytest.fixture
async def repo(tmp_path: Path) -> AsyncIterator[Repository]:
    repo = open_repository(f"sqlite:{tmp_path / 'store.db'}")
    yield repo
    await repo.close()


class Watch:
    """Every event of a bus, and the folded output of each call."""

    def __init__(self) -> None:
        self.events: list[HarnessEvent] = []
        self.outputs: dict[str, Any] = {}
        self.changed = asyncio.Event()

    def __call__(self, event: HarnessEvent) -> None:
        self.events.append(event)
        if isinstance(event, ToolUpdate):
            self.outputs[event.tool_call_id] = apply(
                self.outputs.get(event.tool_call_id), event.ops
            )
        self.changed.set()

    def text(self, call_id: str) -> str:
        out = self.outputs.get(call_id)
        return "".join(b["text"] for b in out["content"] if b["type"] == "text") if out else ""

    async def until(self, what: str, check: Any) -> None:
        async with asyncio.timeout(BOUND):
            while not check():
                self.changed.clear()
                await self.changed.wait()


class Commits:
    """A session that says when it committed (to wait for a checkpoint, not sleep), and
    that can 'die': once ``dead``, every commit fails, as none reaches the store after
    a kill -9."""

    def __init__(self, inner: Session) -> None:
        self.inner = inner
        self.committed = asyncio.Event()
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def commit(self, *args: Any, **kw: Any) -> Any:
        if self.dead:
            raise RuntimeError("this process is dead: nothing it commits reaches the store")
        result = await self.inner.commit(*args, **kw)
        self.committed.set()
        return result

    async def commit_across(self, *args: Any, **kw: Any) -> Any:
        if self.dead:
            raise RuntimeError("this process is dead: nothing it commits reaches the store")
        result = await self.inner.commit_across(*args, **kw)
        self.committed.set()
        return result


async def run_one(harness: Harness, call_id: str, name: str, args: dict[str, Any]) -> Any:
    [result] = await harness.run([ToolCall(call_id, name, args)], turn_id="t1")
    return result


async def test_a_dev_servers_log_reaches_subscribers_and_the_store_after_its_call_settled(
    tmp_path: Path, repo: Repository
) -> None:
    tap = Commits(await repo.create_session("s"))
    session = cast(Session, tap)
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)
    harness = Harness(
        [BASH, BASH_READ, BASH_STOP], context=ToolContext(env=env, cwd=tmp_path), session=session
    )
    harness.hooks.durability.interval = 0.0  # type: ignore[union-attr]  # every change
    watch = Watch()
    harness.bus.add_listener(watch)
    try:
        command = f"exec {PY} -u -m http.server --bind 127.0.0.1 0"
        started = await run_one(harness, "c1", "bash", {"command": command, "yield_after": 0.3})
        handle = started.details["handle"]
        bg = f"c1.{handle}"
        # The starting call settled with the handle; its output goes on in call c1.bg-1.
        assert any(isinstance(e, ToolSettled) and e.tool_call_id == "c1" for e in watch.events)
        await watch.until("the background call", lambda: "Serving HTTP" in watch.text(bg))
        [start] = [e for e in watch.events if isinstance(e, ToolStart) and e.tool_call_id == bg]
        assert start.tool_name == "background"
        assert start.args == {"command": command, "handle": handle, "started_by": "c1"}
        port = re.search(r"port (\d+)", watch.text(bg)).group(1)  # type: ignore[union-attr]
        fetch = f"{PY} -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/')\""
        fetched = await run_one(harness, "c2", "bash", {"command": fetch})
        assert not fetched.is_error
        # The server's log line about that request: live, with no read by the model.
        await watch.until("the log line", lambda: '"GET / HTTP/1.1" 200' in watch.text(bg))
        # ... and checkpointed in the store while the server runs.
        durability = Durability(session)
        pending = {
            c.tool_call_id: p for p in await durability.pending_operations() for c in p.calls
        }
        assert set(pending) == {bg}
        [record] = pending[bg].calls
        assert record.extra == {"kind": "background"}

        async def checkpointed() -> str:
            state = await recover(session, pending_tool_output(pending[bg].operation_id, bg))
            return state.value["content"][0]["text"] if state is not None else ""

        async with asyncio.timeout(BOUND):
            while True:
                tap.committed.clear()  # before the read: a commit during it is not lost
                if '"GET / HTTP/1.1" 200' in await checkpointed():
                    break
                await tap.committed.wait()
        # The model's own read is unaffected: it sees the new bytes since its last read.
        read = await run_one(harness, "c3", "bash_read", {"handle": handle})
        assert '"GET / HTTP/1.1" 200' in read.text
        stopped = await run_one(harness, "c4", "bash_stop", {"handle": handle})
        assert f"{handle} was stopped" in stopped.text
        await watch.until(
            "the settlement",
            lambda: any(isinstance(e, ToolSettled) and e.tool_call_id == bg for e in watch.events),
        )
    finally:
        await env.aclose()
    [settled] = [e for e in watch.events if isinstance(e, ToolSettled) and e.tool_call_id == bg]
    assert settled.message["kind"] == "background"
    assert settled.message["outcome"] == "ok"
    assert settled.message["details"]["ended"] == "stopped"
    assert settled.message["details"]["started_by"] == "c1"
    entries = {e.value["tool_call_id"]: e.value for e in await session.read_entries()}
    assert entries[bg]["kind"] == "background" and "kind" not in entries["c1"]
    assert entries[bg]["what"] == f"{handle} of c1: {command}"
    assert '"GET / HTTP/1.1" 200' in entries[bg]["content"][0]["text"]
    assert entries[bg]["content"][0]["text"].endswith(f"[{handle} was stopped]")
    assert await session.live_scopes() == []
    # A transcript for a model never shows it as a call the model made.
    assistant = {
        "role": "assistant",
        "run_id": "r",
        "turn_id": "t1",
        "content": [{"type": "tool_call", "id": "c1", "name": "bash", "arguments": "{}"}],
    }
    history = rebuild_history([assistant, *entries.values()], task="t", system=None, run_id="r")
    assert [m.get("tool_call_id") for m in history.messages if m["role"] == "tool"] == ["c1"]


async def test_a_command_that_ends_by_itself_settles_its_call_with_its_exit(
    tmp_path: Path, repo: Repository
) -> None:
    session = await repo.create_session("s")
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)
    harness = Harness([BASH], context=ToolContext(env=env, cwd=tmp_path), session=session)
    watch = Watch()
    harness.bus.add_listener(watch)
    gate = tmp_path / "gate"
    command = f"echo before; while [ ! -e {gate} ]; do sleep 0.05; done; echo after; exit 3"
    try:
        started = await run_one(harness, "c1", "bash", {"command": command, "yield_after": 0.3})
        bg = f"c1.{started.details['handle']}"
        await watch.until("the background call", lambda: "before" in watch.text(bg))
        gate.touch()
        await watch.until(
            "the settlement",
            lambda: any(isinstance(e, ToolSettled) and e.tool_call_id == bg for e in watch.events),
        )
    finally:
        await env.aclose()
    [settled] = [e for e in watch.events if isinstance(e, ToolSettled) and e.tool_call_id == bg]
    assert settled.message["outcome"] == "error"
    assert settled.message["details"]["exit_code"] == 3
    text = settled.message["content"][0]["text"]
    assert text.startswith("before\nafter\n") and text.endswith("exited with code 3]")


async def test_the_environment_closing_settles_the_call_as_stopped_by_it(tmp_path: Path) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)
    harness = Harness([BASH], context=ToolContext(env=env, cwd=tmp_path))  # no store
    watch = Watch()
    harness.bus.add_listener(watch)
    started = await run_one(
        harness, "c1", "bash", {"command": "exec sleep 1000", "yield_after": 0.2}
    )
    bg = f"c1.{started.details['handle']}"
    await watch.until(
        "the background call",
        lambda: any(isinstance(e, ToolStart) and e.tool_call_id == bg for e in watch.events),
    )
    await env.aclose()
    await watch.until(
        "the settlement",
        lambda: any(isinstance(e, ToolSettled) and e.tool_call_id == bg for e in watch.events),
    )
    [settled] = [e for e in watch.events if isinstance(e, ToolSettled) and e.tool_call_id == bg]
    assert settled.message["outcome"] == "error"
    assert "its execution environment closed" in settled.message["content"][0]["text"]


class NoParams(BaseModel):
    pass


@tool(params=NoParams, name="background", replay_safe=True)
async def impostor(
    call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """A replay-safe tool that happens to be named like the background calls."""
    raise AssertionError("resume re-ran a background call")


async def test_resume_settles_the_background_calls_a_crash_left_open_saying_why(
    tmp_path: Path, repo: Repository
) -> None:
    inner = await repo.create_session("s")
    tap = Commits(inner)
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)
    harness = Harness(
        [BASH], context=ToolContext(env=env, cwd=tmp_path), session=cast(Session, tap)
    )
    harness.hooks.durability.interval = 0.0  # type: ignore[union-attr]
    durability = Durability(inner)
    try:
        for call_id, word in (("c1", "first"), ("c2", "second")):
            command = f"echo {word}; exec sleep 1000"
            started = await run_one(
                harness, call_id, "bash", {"command": command, "yield_after": 0.3}
            )
            bg = f"{call_id}.{started.details['handle']}"
            async with asyncio.timeout(BOUND):
                while True:  # its output checkpointed while it runs
                    tap.committed.clear()
                    ops = {
                        c.tool_call_id: p
                        for p in await durability.pending_operations()
                        for c in p.calls
                    }
                    state = (
                        await recover(inner, pending_tool_output(ops[bg].operation_id, bg))
                        if bg in ops
                        else None
                    )
                    if state is not None and state.value["content"][0]["text"] == f"{word}\n":
                        break
                    await tap.committed.wait()
        tap.dead = True  # the host process is killed here: nothing more reaches the store
        resumer = Harness([BASH, impostor], context=ToolContext(cwd=tmp_path), session=inner)
        note = "[Background command bg-1: stopped after the crash (killed pid 1).]"
        results = {r.tool_call_id: r for r in await resumer.resume(notes={"c1.bg-1": note})}
    finally:
        await env.aclose()
        await background_settled()  # the dead host's calls end without reaching the store
    assert set(results) == {"c1.bg-1", "c2.bg-2"}
    first, second = results["c1.bg-1"], results["c2.bg-2"]
    assert (first.kind, first.outcome) == ("background", "interrupted")
    assert first.details["interrupted"] == note
    assert first.text.startswith("first\n" + note + "\n") and first.text.endswith(
        INTERRUPTION_MARKER
    )
    assert second.text.startswith("second\n[The process that followed this background command")
    assert "an exec host, which stops its commands" in second.details["interrupted"]
    entries = {e.value["tool_call_id"]: e.value for e in await inner.read_entries()}
    assert entries["c1.bg-1"]["kind"] == "background"
    assert entries["c1.bg-1"]["outcome"] == "interrupted"
    assert await inner.live_scopes() == []


def test_a_loop_closed_with_a_call_still_following_does_not_keep_that_call() -> None:
    """A process that runs many event loops (one ``asyncio.run`` per request, say) and
    closes one while a background command's call is still following it: the next call
    followed lets go of the closed loop's task instead of holding it for good."""
    import gc
    import weakref

    from toolfold.harness._background_call import follow_later
    from toolfold.harness._hooks import CallInfo

    class Background:
        def follow(self, handle: str, *, tag: str) -> object:
            return object()

    class Env:
        background = Background()

    def start(loop: asyncio.AbstractEventLoop, started_by: str) -> weakref.ref[asyncio.Task[Any]]:
        never = asyncio.Event()

        async def drive(info: Any, body: Any) -> None:
            await never.wait()

        async def go() -> asyncio.Task[Any]:
            call = CallInfo("r1", "t1", started_by, "bash", {"command": "x"}, False)
            context = cast(ToolContext, type("Context", (), {"env": Env()})())
            follow_later(call, context, None, drive, "bg-1", "x")
            [task] = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            await asyncio.sleep(0)  # the call starts and waits on its command
            return task

        return weakref.ref(loop.run_until_complete(go()))

    first = asyncio.new_event_loop()
    task = start(first, "c1")
    first.close()  # its task never ran to its end, so its done callback never ran
    second = asyncio.new_event_loop()
    try:
        kept = start(second, "c2")
        gc.collect()
        assert task() is None, "the closed loop's task is still held"
        assert kept() is not None and not kept().done()  # type: ignore[union-attr]
    finally:
        for t in asyncio.all_tasks(second):
            t.cancel()
        second.run_until_complete(asyncio.sleep(0))
        second.close()
