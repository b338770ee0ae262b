"""A host process for the remote kill -9 test: a durable harness whose ``bash`` runs on
an exec host over ssh starts a command that goes on in the background, says so, and
waits to be killed.

Usage: bg_crash_child.py STORE_URL DESTINATION OPTIONS_JSON REMOTE_COMMAND SPILL COMMAND
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from toolfold.execenv import RemoteExecEnv, SSHTransport
from toolfold.harness import Harness, ToolCall, ToolContext
from toolfold.storage import open_repository
from toolfold.tools import BASH


async def main(store: str, dest: str, options: str, remote: str, spill: str, command: str) -> None:
    repo = open_repository(store)
    session = await repo.create_session("s")
    transport = SSHTransport(dest, options=json.loads(options), remote_command=remote)
    env = RemoteExecEnv(transport, spill_dir=spill)
    harness = Harness([BASH], context=ToolContext(env=env, cwd=Path(spill)), session=session)
    [started] = await harness.run(
        [ToolCall("c1", "bash", {"command": command, "yield_after": 0.5})]
    )
    print(started.details["handle"], flush=True)
    await asyncio.Event().wait()  # killed here


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
