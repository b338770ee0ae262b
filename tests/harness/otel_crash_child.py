"""A process that starts two durable calls on a SQLite store, prints ``ready`` once both
have checkpointed their output, and waits to be killed (``kill -9``): the tracing test
resumes what it left behind."""

from __future__ import annotations

import asyncio
import sys

from pydantic import BaseModel

from toolfold.harness import MISSING, Harness, ToolCall, ToolContext, tool
from toolfold.output import ToolOutput
from toolfold.storage import open_repository


class NoParams(BaseModel):
    pass


def tools(ready: list[asyncio.Event] | None = None) -> list[object]:
    """``steps`` (replay-safe: resume re-runs it, skipping memoised steps) and ``deploy``
    (not replay-safe: resume settles it from its checkpoint, interrupted)."""

    @tool(params=NoParams, replay_safe=True)
    async def steps(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Two memoised steps."""
        if await ctx.get_memo("one") is MISSING:
            out.write("step one\n")
            await ctx.set_memo("one", True)
        if ready is not None:
            ready[0].set()
            await asyncio.Event().wait()
        out.write("step two\n")

    @tool(params=NoParams)
    async def deploy(
        call_id: str, params: NoParams, cancel: asyncio.Event, out: ToolOutput, ctx: ToolContext
    ) -> None:
        """Writes, then waits."""
        out.write("deploying\n")
        await ctx.set_memo("started", True)  # a memo commits a checkpoint with it
        if ready is not None:
            ready[1].set()
        await asyncio.Event().wait()

    return [steps, deploy]


async def main(url: str) -> None:
    repo = open_repository(url)
    session = await repo.open_session("s", create=True)
    ready = [asyncio.Event(), asyncio.Event()]
    harness = Harness(tools(ready), session=session)  # type: ignore[arg-type]
    run = asyncio.ensure_future(
        harness.run([ToolCall("c1", "steps", {}), ToolCall("c2", "deploy", {})], run_id="r1")
    )
    await ready[0].wait()
    await ready[1].wait()
    print("ready", flush=True)
    await run


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
