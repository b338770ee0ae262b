"""The demo's crash victim: runs the memoising ``demo_steps`` tool durably and reports
each committed memo on stdout, so the parent can SIGKILL it at a known point.

Usage: ``python -m toolfold.cli._demo_child STORE_URL SESSION STEPS STEP_SECONDS HOLD_AT``:
after the memo of step ``HOLD_AT`` it waits for a line on stdin (the parent never sends
one: it kills the child there), so the kill lands at the same point on a loaded machine.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from toolfold.harness import Harness, ToolCall, ToolContext
from toolfold.storage import open_repository

from ._demo_steps import DEMO_STEPS


async def _main(url: str, session_name: str, steps: int, step_seconds: float, hold_at: int) -> None:
    repo = open_repository(url)
    try:
        session = await repo.open_session(session_name, create=True)

        def after_memo(step: int) -> None:
            # Printed only after the memo's transaction returned: the parent kills on it.
            print(f"memo {step}", flush=True)
            if step == hold_at:
                # Blocks the whole process on purpose: nothing moves until the kill.
                sys.stdin.readline()

        harness = Harness(
            [DEMO_STEPS],
            context=ToolContext(cwd=Path.cwd(), extra={"after_memo": after_memo}),
            session=session,
        )
        args = {"steps": steps, "step_seconds": step_seconds}
        await harness.run([ToolCall("call-steps", DEMO_STEPS.name, args)], run_id="run-steps")
    finally:
        await repo.close()


if __name__ == "__main__":
    asyncio.run(
        _main(sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
    )
