"""The demo's memoising tool, ``demo_steps``: ``toolfold resume`` can re-run it seeded
from its last memo (the demo kills it mid-run to show that)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, Field

from toolfold.harness import MISSING, Tool, ToolContext
from toolfold.output import OutputPolicy, ToolOutput


class StepsParams(BaseModel):
    """Arguments of the demo's ``demo_steps`` tool."""

    steps: int = Field(default=8, ge=1, le=1000, description="How many steps to run.")
    step_seconds: float = Field(
        default=0.2, ge=0, le=10, description="How long each step works before it reports."
    )


async def run_steps(
    tool_call_id: str,
    params: StepsParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Run numbered steps; each writes one line, then memoises that it is done.

    Replay-safe: after a crash the harness re-runs it with a sink seeded from the state
    committed with the last memo, so finished steps are skipped (they emit nothing, their
    lines are already in the sink) and the interrupted step is redone once."""
    done = await context.get_memo("done")
    first = 1 if done is MISSING else int(done) + 1
    hook = context.extra.get("after_memo")
    for step in range(first, params.steps + 1):
        if cancel.is_set():
            return
        out.write(f"step {step}/{params.steps}: working\n")
        await asyncio.sleep(params.step_seconds)  # the step's work
        out.write(f"step {step}/{params.steps}: done\n")
        out.details["done"] = step
        # Output first, memo second: the memo commits with a checkpoint holding the line.
        await context.set_memo("done", step)
        if callable(hook):
            hook(step)


DEMO_STEPS: Tool[StepsParams] = Tool(
    name="demo_steps",
    description=(run_steps.__doc__ or "").split("\n")[0],
    params=StepsParams,
    execute=run_steps,
    output=OutputPolicy(retain="head"),
    replay_safe=True,
)
