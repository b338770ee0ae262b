"""One "host" of the multi-host tests and benchmark: a harness process on a shared store.

Usage: ``host_child.py URL SESSION HOST CALL TTL [--janitor SECONDS]``

Runs one leased call ``CALL`` (tool ``worker``, not replay-safe) as host ``HOST`` with
lease ``TTL`` seconds. The tool writes ``before`` and prints ``READY`` once that is
durable, then obeys stdin, one command per line, answering one line each:

- ``write TEXT``: write TEXT to the call's output and force a checkpoint
  (``OK`` or ``FENCED <message>``);
- ``finish``: return, so the harness settles the call (``SETTLED`` or
  ``RUN-ERROR <type> <message>``).

With ``--janitor``, a second harness on the same session resumes orphaned calls (expired
leases) every SECONDS, printing ``RESUMED <call id>`` for each call it settled.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from pydantic import BaseModel

from toolfold.durability import Durability, FencedError
from toolfold.harness import DurableHooks, Harness, ToolCall, ToolContext, resume_orphans, tool
from toolfold.output import OutputPolicy, ToolOutput
from toolfold.storage import open_repository


class NoParams(BaseModel):
    pass


def say(line: str) -> None:
    print(line, flush=True)


async def main(
    url: str, session_name: str, host: str, call_id: str, ttl: float, janitor: float | None
) -> None:
    repo = open_repository(url)
    session = await repo.open_session(session_name, create=True)
    hooks = DurableHooks(Durability(session, host=host, lease_ttl=ttl, interval=0.0))
    commands: asyncio.Queue[str] = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def read_stdin() -> None:
        line = sys.stdin.readline()
        commands.put_nowait(line.strip() if line else "finish")

    loop.add_reader(sys.stdin.fileno(), read_stdin)

    def stream() -> Any:
        return next(iter(hooks._calls.values())).stream

    @tool(params=NoParams, output=OutputPolicy(retain="tail", max_bytes=4096))
    async def worker(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Writes what it is told, until told to finish."""
        out.write("before\n")
        await stream().force()
        say("READY")
        while True:
            cmd = await commands.get()
            if cmd == "finish":
                return
            out.write(cmd.removeprefix("write ") + "\n")
            try:
                await stream().force()
            except FencedError as exc:
                say(f"FENCED {exc}")
            else:
                say("OK")

    jan: asyncio.Task[Any] | None = None
    if janitor is not None:
        keeper = Harness([], hooks=DurableHooks(Durability(session, host=host, lease_ttl=ttl)))

        def report(results: list[Any]) -> None:
            for r in results:
                say(f"RESUMED {r.tool_call_id}")

        jan = loop.create_task(resume_orphans(keeper, interval=janitor, on_results=report))
    h = Harness([worker], hooks=hooks)
    try:
        await h.run([ToolCall(call_id, "worker")], run_id=f"run-{call_id}")
    except Exception as exc:  # reported to the test, which asserts on it
        leaf: BaseException = exc
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]  # the harness runs calls in a task group
        say(f"RUN-ERROR {type(leaf).__name__} {leaf}")
    else:
        say("SETTLED")
    if jan is not None:
        # Keep resuming orphans until told to stop (stdin closed or another line).
        await commands.get()
        jan.cancel()
    await repo.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    jan = float(args[6]) if len(args) > 6 and args[5] == "--janitor" else None
    asyncio.run(main(args[0], args[1], args[2], args[3], float(args[4]), jan))
