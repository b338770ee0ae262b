"""Crash-kill child: runs tools on a JSONL or SQLite store and SIGKILLs itself at storage
call #k (optionally leaving that commit's record torn), for the crash-kill suite.

Modes:

- ``python crashkill_child.py serve`` — a fork server: reads one JSON request per line
  on stdin, forks a grandchild per request (the imports are already paid for, so a
  kill point costs a fork, not an interpreter start), waits for it and answers one
  JSON line ``{"signal": 9 | null, "exit": int | null}``;
- ``python crashkill_child.py run '<request json>'`` — one run in this process.

A request: ``{"url": store url, "dir": run directory, "kill_at": k (0: never),
"torn": bool, "seed": int}``. The grandchild appends a trace to ``<dir>/trace.jsonl``
(one ``os.write`` per line, so it survives SIGKILL): for every commit, the producer
state of each durable batch *as computed inside the session line* (``plan``), then
``done`` once the commit returned (``torn`` instead when the record was cut).

While the tools run, the grandchild also streams one assistant message through a
durable ``MessageWriter`` (thinking, text and tool-call argument deltas, a yield after
each), so kills land inside its paced ``pending.assistant_output`` checkpoints and its
settlement too; the trace records the message's state for each of its batches.

Then it makes ``SHORT_CALLS`` short calls the way ``toolfold mcp`` does: each its own
leased run with the default checkpoint interval, a host record committed with the lease
and the output's totals with the settlement; each ends inside its first interval, so
its output is written once, by the settlement. The trace records which calls' starts
were planned (``started``).

The tool definitions and expected outputs live here too; the test imports them to
resume in its own process and check the invariants of docs/durability.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import random
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from toolfold.durability import Durability, default_host_id
from toolfold.execenv import LocalExecEnv
from toolfold.harness import (
    MISSING,
    DurableHooks,
    Harness,
    MessageWriter,
    Tool,
    ToolCall,
    ToolContext,
    tool,
)
from toolfold.output import AssistantMessageState, AssistantOutput, OutputPolicy, ToolOutput
from toolfold.storage import (
    AppendEntry,
    AppendList,
    FsyncPolicy,
    Session,
    SetValue,
    open_repository,
    set_value,
    value,
)

SESSION = "crash"
RUN_ID = "op1"
TURN_ID = "t1"
STEPS = 5
PARTS = 3
MESSAGE_ID = "m1"
MESSAGE_DELTAS = 24
MESSAGE_STOP = "tool_calls"


class StepParams(BaseModel):
    seed: int = 0


class DetailParams(BaseModel):
    seed: int = 0
    rounds: int = 12


def step_line(seed: int, i: int, j: int) -> str:
    """The deterministic output of part ``j`` of step ``i``."""
    rng = random.Random(seed * 1000 + i * 10 + j)
    return (
        f"step {i} part {j} "
        + "".join(rng.choice("abcdefgh ") for _ in range(rng.randrange(5, 40)))
        + "\n"
    )


def expected_steps_text(seed: int) -> str:
    """The memoising tool's full output: every part of every step, exactly once."""
    return "".join(step_line(seed, i, j) for i in range(STEPS) for j in range(PARTS))


def expected_steps_details() -> dict[str, Any]:
    return {"done": STEPS - 1, "steps": list(range(STEPS))}


@tool(
    params=StepParams,
    name="steps",
    replay_safe=True,
    output=OutputPolicy(retain="tail", max_bytes=64 * 1024),
)
async def steps_tool(
    call_id: str, params: StepParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """A replay-safe multi-step tool: each step writes several parts, then is memoised."""
    for i in range(STEPS):
        if await ctx.get_memo(f"step{i}") is not MISSING:
            continue
        for j in range(PARTS):
            out.write(step_line(params.seed, i, j))
            await asyncio.sleep(0)  # a yield: lets paced checkpoints interleave
        out.details["done"] = i
        out.details.setdefault("steps", []).append(i)
        out.usage({"input_tokens": 3, "output_tokens": 1})
        await ctx.set_memo(f"step{i}", {"i": i})


@tool(params=DetailParams, name="details", output=OutputPolicy(retain="tail", max_bytes=512))
async def details_tool(
    call_id: str, params: DetailParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
) -> None:
    """A details-heavy tool (not replay-safe): counters, a list that grows and shrinks."""
    rng = random.Random(params.seed)
    out.details["n"] = 0
    out.details["items"] = []
    for r in range(params.rounds):
        out.details["n"] += 1
        out.details["items"].append({"r": r, "v": rng.randrange(1000)})
        if r % 4 == 3:
            del out.details["items"][0]
        if r % 3 == 0:
            out.details["current"] = f"round {r}"
        elif "current" in out.details:
            del out.details["current"]
        out.write(f"round {r}\n")
        await asyncio.sleep(0)


def bash_tool() -> Tool[Any]:
    """The built-in bash tool with a small window, so its output spills."""
    from toolfold.tools import BASH

    return dataclasses.replace(
        BASH, output=OutputPolicy(retain="tail", max_bytes=1500, max_lines=40)
    )


BASH_COMMAND = 'for i in $(seq 1 300); do echo "bash line $i of the build log"; done'


SHORT_CALLS = 3
RECORD_NAMESPACE = "crash.record"


def short_call(i: int) -> ToolCall:
    """Short call ``i``: ends well inside its first checkpoint interval."""
    return ToolCall(f"c-short{i}", "bash", {"command": f"echo short {i}"})


def short_text(i: int) -> str:
    return f"short {i}\n"


def short_record(call_id: str, settled: bool) -> Any:
    """What the host records about a short call: at its start, then with its totals."""
    return {"call": call_id, **({"settled": True} if settled else {})}


def calls(seed: int) -> list[ToolCall]:
    return [
        ToolCall("c-steps", "steps", {"seed": seed}),
        ToolCall("c-details", "details", {"seed": seed}),
        ToolCall("c-bash", "bash", {"command": BASH_COMMAND}),
    ]


def tools() -> list[Tool[Any]]:
    return [steps_tool, details_tool, bash_tool()]


def build_harness(session: Any, directory: Path, hooks: DurableHooks | None = None) -> Harness:
    spill = directory / "spill"
    spill.mkdir(exist_ok=True)
    hooks = hooks if hooks is not None else DurableHooks(Durability(session, interval=0.0))
    return Harness(
        tools(),
        hooks=hooks,
        context=ToolContext(env=LocalExecEnv(spill), cwd=directory),
    )


def message_deltas(seed: int) -> list[tuple[Any, ...]]:
    """The assistant message's deltas: reasoning, answer text, two tool calls whose
    argument text streams in pieces (deterministic per seed)."""
    rng = random.Random(seed * 7919 + 1)
    deltas: list[tuple[Any, ...]] = []
    for i in range(MESSAGE_DELTAS):
        word = "".join(rng.choice("abcdefgh ") for _ in range(rng.randrange(1, 30)))
        if i < 4:
            deltas.append(("thinking", f"[{i}] {word}"))
        elif i < 16:
            deltas.append(("text", f"[{i}] {word}\n"))
        else:
            index = (i - 16) % 2
            args = f'{{"n": {i}, "w": "{word}"}}' if i >= 22 else f"[{i}]{word}"
            deltas.append(("tool_call", index, f"call-{index}", f"tool{index}", args))
    return deltas


def apply_delta(out: AssistantOutput, delta: tuple[Any, ...]) -> None:
    kind = delta[0]
    if kind == "thinking":
        out.thinking(delta[1])
    elif kind == "text":
        out.text(delta[1])
    else:
        out.tool_call(delta[1], id=delta[2], name=delta[3], arguments=delta[4])


def expected_message(seed: int) -> AssistantMessageState:
    """The settled message of an uninterrupted run."""
    out = AssistantOutput()
    for delta in message_deltas(seed):
        apply_delta(out, delta)
    out.end(MESSAGE_STOP)
    return out.snapshot()


async def stream_message(session: Any, harness: Harness, seed: int, hooks: Any) -> None:
    """Generate the assistant message durably (checkpoints paced at interval 0)."""
    writer = MessageWriter(
        bus=harness.bus,
        run_id=RUN_ID,
        turn_id=TURN_ID,
        message_id=MESSAGE_ID,
        session=session,
        interval=0.0,
    )
    hooks.message = writer
    async with writer:
        for delta in message_deltas(seed):
            apply_delta(writer.out, delta)
            await asyncio.sleep(0)  # a yield: lets paced checkpoints interleave
        writer.out.end(MESSAGE_STOP)


# -- the grandchild -------------------------------------------------------------------


class Trace:
    """Append-only trace lines, one ``os.write`` each (nothing buffered in-process)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def write(self, **record: Any) -> None:
        os.write(self.fd, orjson.dumps(record) + b"\n")


class RecordingHooks(DurableHooks):
    """Remembers each call's sink so the trace can record producer states."""

    def __init__(self, durability: Durability) -> None:
        super().__init__(durability)
        self.sinks: dict[str, ToolOutput] = {}
        self.message: MessageWriter | None = None

    async def on_sink_created(
        self, call: Any, sink: ToolOutput, context: ToolContext
    ) -> ToolContext:
        self.sinks[call.tool_call_id] = sink
        return await super().on_sink_created(call, sink, context)


class KillSession:
    """Delegates to a session; counts every storage call and SIGKILLs the process right
    before call #kill_at (or, with ``torn``, right after commit #kill_at wrote a record,
    cutting that record short first — what a crash mid-write leaves)."""

    def __init__(
        self, inner: Session, kill_at: int, torn: bool, root: Path, trace: Trace, seed: int
    ) -> None:
        self.inner = inner
        self.kill_at = kill_at
        self.torn = torn
        self.root = root
        self.trace = trace
        self.calls = 0
        self.rng = random.Random(seed)
        self.hooks: RecordingHooks | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _tick(self, commit: bool) -> bool:
        self.calls += 1
        if self.calls == self.kill_at and not (self.torn and commit):
            os.kill(os.getpid(), signal.SIGKILL)
        return self.calls == self.kill_at

    def _sizes(self) -> dict[Path, int]:
        return {p: p.stat().st_size for p in self.root.rglob("*") if p.is_file()}

    async def commit(self, writes: Any, **kw: Any) -> Any:
        return await self._commit(writes, lambda planned: self.inner.commit(planned, **kw))

    async def commit_across(self, session_writes: Any, scope_writes: Any, **kw: Any) -> Any:
        # One transaction across two scopes (an operation's lease and start): traced and
        # killed like a commit; its planning runs before it enters the line, which is
        # the same for the trace (nothing else commits in between in this child).
        both = [*session_writes, *scope_writes]

        def run(planned: Any) -> Any:
            planned()
            return self.inner.commit_across(session_writes, scope_writes, **kw)

        return await self._commit(both, run)

    async def _commit(self, writes: Any, run: Any) -> Any:
        tear = self._tick(commit=True)
        n = self.calls

        def planned() -> Any:
            ws = writes() if callable(writes) else writes
            lists: dict[str, Any] = {}
            memo: list[str] = []
            msg: list[str] = []
            started: list[str] = []
            assert self.hooks is not None
            for w in ws:
                if isinstance(w, AppendList) and w.address.namespace == "pending.tool_output":
                    inv = w.address.key.split(":", 1)[1]
                    lists[inv] = self.hooks.sinks[inv]._current_target()
                if isinstance(w, AppendList) and w.address.namespace == "pending.assistant_output":
                    assert self.hooks.message is not None
                    lists[MESSAGE_ID] = self.hooks.message.out.snapshot()
                if isinstance(w, SetValue) and w.address.namespace == "op.tool_memo_seed":
                    memo.append(w.address.key.split(":", 1)[1])
                if isinstance(w, SetValue) and w.address.namespace == "op.messages":
                    msg.append("start")  # the message's operation is recorded
                if isinstance(w, SetValue) and w.address.namespace == "op.calls":
                    started.append(w.address.key.split(":", 1)[1])
                entry = w.entry if isinstance(w, AppendEntry) else None
                if isinstance(entry, dict) and entry.get("role") == "assistant":
                    msg.append("settle")  # the final message + retirement
            if lists or memo or msg or started:
                self.trace.write(ev="plan", n=n, lists=lists, memo=memo, msg=msg, started=started)
            return ws

        def planned_then_tear() -> Any:
            ws = planned()
            if tear and ws:  # an empty commit writes nothing there is to tear
                # Installed inside the line, so it is this commit's write that tears.
                self._tear_inside_the_line(n)
            return ws

        result = await run(planned_then_tear)
        self.trace.write(ev="done", n=n)
        if tear:  # the commit wrote nothing, so nothing tore: die right after it
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    def _tear_inside_the_line(self, n: int) -> None:
        # The cut must happen right after this commit's record is written and before
        # anything else can write (while the session line is held), or it could cut
        # into a later commit's complete record — not what a crash mid-write leaves.
        inner: Any = self.inner
        original = inner._commit_writes

        async def tearing(ws: Any, scope: Any) -> Any:
            inner._commit_writes = original
            before = self._sizes()
            await original(ws, scope)
            after = self._sizes()
            if any(p not in after for p in before):
                # The commit went on to unlink a retired side file: a crash mid-write
                # would have come before that, so a cut record here is no real state.
                self.trace.write(ev="done", n=n)
                os.kill(os.getpid(), signal.SIGKILL)
            grown = [
                (p, before[p], size)
                for p, size in after.items()
                if p in before and before[p] > 0 and size - before[p] >= 2
            ]
            if grown:
                path, old, new = grown[0]
                os.truncate(path, old + self.rng.randrange(1, new - old))
                # A file this commit created came after the record it cut (JSONL's
                # commit_across appends to the main log, then creates the side file):
                # a crash mid-write of that record never got to create it.
                for created in [p for p in after if p not in before]:
                    created.unlink()
                self.trace.write(ev="torn", n=n, path=str(path))
            else:
                # A new file (created whole by rename) or a backend without an
                # appendable record: this commit is simply durable.
                self.trace.write(ev="done", n=n)
            os.kill(os.getpid(), signal.SIGKILL)

        inner._commit_writes = tearing

    async def get_value(self, *a: Any, **k: Any) -> Any:
        self._tick(commit=False)
        return await self.inner.get_value(*a, **k)

    async def read_list(self, *a: Any, **k: Any) -> Any:
        self._tick(commit=False)
        return await self.inner.read_list(*a, **k)

    async def scan_values(self, *a: Any, **k: Any) -> Any:
        self._tick(commit=False)
        return await self.inner.scan_values(*a, **k)

    async def read_entries(self, *a: Any, **k: Any) -> Any:
        self._tick(commit=False)
        return await self.inner.read_entries(*a, **k)


def install_broken_memo(kind: str) -> None:
    """Replace the bundled memo transaction by one of the two ordered designs that are
    wrong (docs/durability.md), so the suite can show that it detects them (the checker must fail)."""
    from toolfold.durability import DurableInvocation, operation_memo_seed, operation_tool_memo
    from toolfold.storage import set_value

    async def set_memo(self: DurableInvocation, name: str, memo: Any) -> None:
        op, inv = self.record.operation_id, self.record.invocation_id
        session = self.stream.session

        def checkpoint() -> list[Any]:
            write = self.stream.plan_batch(base=True)
            assert write is not None
            return [write, set_value(operation_memo_seed(op, inv), write.element)]

        memo_write = [set_value(operation_tool_memo(op, inv, name), memo)]
        if kind == "memo_then_checkpoint":
            await session.commit(memo_write)
            await session.commit(checkpoint)
        elif kind == "checkpoint_then_memo":
            await session.commit(checkpoint)
            await session.commit(memo_write)
        else:
            raise ValueError(kind)

    DurableInvocation.set_memo = set_memo  # type: ignore[method-assign]


async def run_scenario(req: dict[str, Any]) -> None:
    if req.get("broken") in ("memo_then_checkpoint", "checkpoint_then_memo"):
        install_broken_memo(req["broken"])
    directory = Path(req["dir"])
    trace = Trace(directory / "trace.jsonl")
    # SIGKILL kills the process, not the machine: data handed to the OS survives, so
    # fsync adds nothing to what these kills can show (and costs most of the time).
    repo = open_repository(req["url"], fsync=FsyncPolicy(main="none", side="none"))
    session = await repo.open_session(SESSION, create=True)
    store_root = Path(req.get("store_root", directory / "store"))
    ks = KillSession(
        session, int(req["kill_at"]), bool(req.get("torn")), store_root, trace, req["seed"]
    )
    hooks = RecordingHooks(Durability(ks, interval=0.0))  # type: ignore[arg-type]
    ks.hooks = hooks
    harness = build_harness(ks, directory, hooks)
    await asyncio.gather(
        harness.run(calls(req["seed"]), run_id=RUN_ID, turn_id=TURN_ID),
        stream_message(ks, harness, req["seed"], hooks),
    )
    await short_calls(ks, directory, hooks, trace, apart=req.get("broken") == "record_apart")
    trace.write(ev="complete", calls=ks.calls)
    await session.close()
    await repo.close()


async def short_calls(
    session: Any, directory: Path, main: RecordingHooks, trace: Trace, *, apart: bool = False
) -> None:
    """The short calls, one run each, as ``toolfold mcp`` makes them (see the module doc).

    ``apart``: the rejected design, the host's settled record committed on its own after
    the settlement (what ``toolfold mcp`` did before ``record_call``), so the suite can
    show that it detects a record that disagrees with the transcript."""
    hooks = RecordingHooks(Durability(session, host=default_host_id()))
    hooks.sinks = main.sinks  # one table of producers for the trace
    harness = build_harness(session, directory, hooks)
    for i in range(SHORT_CALLS):
        call = short_call(i)
        run_id = f"short-{i}"
        address = value(RECORD_NAMESPACE, call.id)
        hooks.record_call(
            run_id,
            call.id,
            start=[set_value(address, short_record(call.id, False))],
            settled=None
            if apart
            else lambda _result, a=address, c=call.id: [set_value(a, short_record(c, True))],
        )
        trace.write(ev="short", i=i)
        await harness.run([call], run_id=run_id, turn_id=TURN_ID)
        if apart:
            await session.commit([set_value(address, short_record(call.id, True))])


def run_one(req: dict[str, Any]) -> int:
    try:
        asyncio.run(run_scenario(req))
    except BaseException:
        traceback.print_exc()
        return 3
    return 0


def _preload() -> None:
    """Pay every lazy import once, before forking: each grandchild inherits them."""
    import toolfold.storage._jsonl
    import toolfold.storage._postgres
    import toolfold.storage._sqlite
    import toolfold.tools  # noqa: F401

    tools()


def serve() -> None:
    _preload()
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the grandchild: run, never return into the server loop
            code = 3
            try:
                if not os.environ.get("CRASHKILL_DEBUG"):
                    devnull = os.open(os.devnull, os.O_WRONLY)
                    os.dup2(devnull, 2)
                code = run_one(req)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        answer = {
            "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        }
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "serve":
        serve()
    elif len(sys.argv) >= 3 and sys.argv[1] == "run":
        sys.exit(run_one(json.loads(sys.argv[2])))
    else:
        sys.exit("usage: crashkill_child.py serve | run '<request json>'")
