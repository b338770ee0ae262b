"""Background commands (``exec(..., yield_after=...)``): latency, idle CPU, bytes per read.

Run: .venv/bin/python benchmarks/bench_background.py [--quick]

Three measurements, each beside the alternative a harness would otherwise use:

1. **Latency from a write to a subscriber.** A background child prints
   ``time.monotonic_ns()`` every 200 ms (flushed); a subscriber parses the newest stamp
   of each update on arrival: the delay is arrival minus stamp. Two subscribers: the
   exec env's own (``background.follow``: its paced updates), and a listener on the
   bus of a ``Harness`` with a SQLite session, which gets the ops of the call that
   records the command's output after ``bash`` settled (what ``toolfold serve``'s
   lanes and the viewer fold; the durable checkpoints run beside it). The
   alternative: polling ``read`` every 500 ms (as an agent loop calling a read tool
   would), delay = when the poll returned the line minus its stamp.
2. **CPU of an idle background command.** ``sleep`` in the background, nobody reading
   it, for a few seconds: this process's user+system CPU seconds per wall second; and
   the same command started by ``bash`` in a durable harness, whose background call
   follows it (updates, checkpoints). The alternative: a read every 100 ms (a poller
   that tails the output).
3. **Bytes per read for a chatty server.** The child prints a 100-byte log line every
   5 ms; ten reads 300 ms apart. Ours: the text a read returns (only what is new).
   The alternative: the whole current window each time (what a tool that returns
   "the output so far" sends): ``len`` of the session's view text at the same moments.

Not measured: a remote exec host (the same code runs there, plus the link), a
terminal (``tty=True`` reads one master side instead of two pipes), the model's side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from toolfold.chord import apply
from toolfold.execenv import (
    Append,
    LocalExecEnv,
    Replace,
    ShellOutputUpdate,
    Slide,
)
from toolfold.harness import (
    Harness,
    HarnessEvent,
    ToolCall,
    ToolContext,
    ToolUpdate,
    background_settled,
)
from toolfold.storage import open_repository
from toolfold.tools import BASH

STAMPER = (
    "import time, sys\n"
    "for _ in range({n}):\n"
    "    print(time.monotonic_ns(), flush=True)\n"
    "    time.sleep(0.2)\n"
    "time.sleep(1000)\n"
)
CHATTY = (
    "import time\n"
    "i = 0\n"
    "while True:\n"
    "    print(f'127.0.0.1 - - GET /api/items/{{i:08d}} HTTP/1.1 200 -', 'x' * 40, flush=True)\n"
    "    i += 1\n"
    "    time.sleep(0.005)\n"
)


def _texts(update: ShellOutputUpdate) -> str:
    if isinstance(update, Replace):
        return update.output.text
    if isinstance(update, Append | Slide):
        return update.text
    return ""


async def latency(env: LocalExecEnv, stamps: int) -> tuple[list[float], list[float]]:
    script = Path(tempfile.mkdtemp()) / "stamp.py"
    script.write_text(STAMPER.format(n=stamps))
    pushed: list[float] = []
    seen: set[int] = set()

    def on_update(update: ShellOutputUpdate) -> None:
        now = time.monotonic_ns()
        for word in _texts(update).split():
            if word.isdigit() and int(word) not in seen:
                seen.add(int(word))
                pushed.append((now - int(word)) / 1e6)

    started = await env.exec(f"exec {sys.executable} -u {script}", yield_after=0.05)
    assert started.handle is not None
    follower = asyncio.ensure_future(env.background.follow(started.handle)(on_update))
    polled: list[float] = []
    # The poller runs at the same time on the same command (reads do not disturb
    # the subscriber: they window a second capture).
    for _ in range(int(stamps * 0.2 / 0.5) + 2):
        await asyncio.sleep(0.5)
        read = await env.background.read(started.handle)
        now = time.monotonic_ns()
        polled += [(now - int(w)) / 1e6 for w in read.text.split() if w.isdigit()]
    await env.background.stop(started.handle)
    await follower
    return pushed, polled


async def harness_latency(tmp: Path, stamps: int) -> list[float]:
    """Write → a listener on a durable harness's bus, through the background call."""
    script = tmp / "stamp_harness.py"
    script.write_text(STAMPER.format(n=stamps))
    env = LocalExecEnv(tmp / "spill-harness", kill_grace=0.5)
    repo = open_repository(f"sqlite:{tmp / 'bench.db'}")
    session = await repo.create_session("bench")
    harness = Harness([BASH], context=ToolContext(env=env, cwd=tmp), session=session)
    outputs: dict[str, object] = {}
    seen: set[int] = set()
    pushed: list[float] = []

    def listener(event: HarnessEvent) -> None:
        if not isinstance(event, ToolUpdate):
            return
        now = time.monotonic_ns()
        state = outputs[event.tool_call_id] = apply(outputs.get(event.tool_call_id), event.ops)
        text = "".join(b["text"] for b in state["content"] if b["type"] == "text")  # type: ignore[index]
        for word in text.split():
            # Stamps first shown by the starting call count there, not again.
            if word.isdigit() and int(word) not in seen:
                seen.add(int(word))
                pushed.append((now - int(word)) / 1e6)

    harness.bus.add_listener(listener)
    command = f"exec {sys.executable} -u {script}"
    [started] = await harness.run(
        [ToolCall("c1", "bash", {"command": command, "yield_after": 0.05})]
    )
    await asyncio.sleep(stamps * 0.2 + 0.5)
    await env.background.stop(started.details["handle"])
    await env.aclose()
    await background_settled()
    await repo.close()
    return pushed


async def idle_cpu(env: LocalExecEnv, seconds: float, poll: float | None) -> float:
    started = await env.exec("exec sleep 1000", yield_after=0.05)
    assert started.handle is not None
    before, wall = os.times(), time.monotonic()
    if poll is None:
        await asyncio.sleep(seconds)
    else:
        while time.monotonic() - wall < seconds:
            await asyncio.sleep(poll)
            await env.background.read(started.handle)
    after, elapsed = os.times(), time.monotonic() - wall
    await env.background.stop(started.handle)
    return (after.user - before.user + after.system - before.system) / elapsed


async def idle_followed_cpu(tmp: Path, seconds: float) -> float:
    """The same idle command started by ``bash`` in a durable harness (SQLite): its
    background call follows it, checkpoints and all."""
    env = LocalExecEnv(tmp / "spill-idle", kill_grace=0.5)
    repo = open_repository(f"sqlite:{tmp / 'idle.db'}")
    session = await repo.create_session("idle")
    harness = Harness([BASH], context=ToolContext(env=env, cwd=tmp), session=session)
    command = {"command": "exec sleep 1000", "yield_after": 0.05}
    [started] = await harness.run([ToolCall("c1", "bash", command)])
    await asyncio.sleep(1.5)  # past the background call's start and first checkpoint
    before, wall = os.times(), time.monotonic()
    await asyncio.sleep(seconds)
    after, elapsed = os.times(), time.monotonic() - wall
    await env.background.stop(started.details["handle"])
    await env.aclose()
    await background_settled()
    await repo.close()
    return (after.user - before.user + after.system - before.system) / elapsed


async def bytes_per_read(env: LocalExecEnv, reads: int) -> tuple[list[int], list[int]]:
    script = Path(tempfile.mkdtemp()) / "chatty.py"
    script.write_text(CHATTY)
    started = await env.exec(f"exec {sys.executable} {script}", yield_after=0.05)
    assert started.handle is not None
    entry = env.background._entries[started.handle]  # the session, for the whole view
    ours: list[int] = []
    whole: list[int] = []
    for _ in range(reads):
        await asyncio.sleep(0.3)
        read = await env.background.read(started.handle)
        ours.append(len(read.text.encode()))
        whole.append(len(entry.proc.session.view().text.encode()))
    await env.background.stop(started.handle)
    return ours, whole


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def main(quick: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = LocalExecEnv(Path(tmp) / "spill", kill_grace=0.5)
        pushed, polled = await latency(env, 15 if quick else 50)
        bus = await harness_latency(Path(tmp), 15 if quick else 50)
        print("| write → consumer | median | p95 | samples |")
        print("| --- | --- | --- | --- |")
        print(
            f"| exec env subscriber (`follow`, paced updates) | {statistics.median(pushed):.1f} ms | "
            f"{pct(pushed, 0.95):.1f} ms | {len(pushed)} |"
        )
        print(
            f"| harness bus, background call ops (SQLite session) | "
            f"{statistics.median(bus):.1f} ms | {pct(bus, 0.95):.1f} ms | {len(bus)} |"
        )
        print(
            f"| poll `read` every 500 ms | {statistics.median(polled):.1f} ms | "
            f"{pct(polled, 0.95):.1f} ms | {len(polled)} |"
        )
        print(
            f"\nratio (poll / subscriber, median): "
            f"{statistics.median(polled) / statistics.median(pushed):.0f}x; "
            f"poll / harness bus: {statistics.median(polled) / statistics.median(bus):.0f}x\n"
        )
        seconds = 2.0 if quick else 5.0
        idle = await idle_cpu(env, seconds, None)
        polling = await idle_cpu(env, seconds, 0.1)
        followed = await idle_followed_cpu(Path(tmp), seconds)
        print("| idle background command | CPU s / wall s |")
        print("| --- | --- |")
        print(f"| nobody reading | {idle:.4f} |")
        print(f"| followed by its background call (durable harness, SQLite) | {followed:.4f} |")
        print(f"| a read every 100 ms | {polling:.4f} |")
        ours, whole = await bytes_per_read(env, 5 if quick else 10)
        print("\n| chatty server, a read every 300 ms | bytes per read (median) | total |")
        print("| --- | --- | --- |")
        print(f"| new output only (`bash_read`) | {statistics.median(ours):,.0f} | {sum(ours):,} |")
        print(f"| the whole window each time | {statistics.median(whole):,.0f} | {sum(whole):,} |")
        print(f"\nratio (whole / new, total): {sum(whole) / max(1, sum(ours)):.1f}x")
        await env.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    asyncio.run(main(parser.parse_args().quick))
