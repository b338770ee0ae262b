"""kill -9 in the middle of a streamed answer, then ``toolfold resume`` keeps the
partial text (a real agent process, the real openai client, a SQLite store)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from agent_helpers import checkpointed_text
from scripted_server import ScriptedServer, text_chunks

from toolfold.storage import open_repository

CHILD = Path(__file__).resolve().parent / "crash_child.py"
PARTIAL = "A long answer that was cut "


async def test_kill_9_mid_answer_then_resume_keeps_the_partial_text(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    chunks = [*text_chunks(PARTIAL, 4)[:-2], "HOLD"]
    async with ScriptedServer([chunks]) as server:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHILD),
            server.base_url,
            url,
            "agent",
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            for _ in range(600):  # bounded poll: up to about 30 s for the checkpoint
                if await checkpointed_text(url, "agent") == PARTIAL or proc.returncode is not None:
                    break
                await asyncio.sleep(0.05)
            assert await checkpointed_text(url, "agent") == PARTIAL, proc.returncode
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    done = subprocess.run(
        [sys.executable, "-m", "toolfold.cli", "resume", "agent", "--store", url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"{len(PARTIAL)} characters of text kept" in done.stdout
    repo = open_repository(url)
    try:
        session = await repo.open_session("agent")
        [entry] = [e.value for e in await session.read_entries()]
        assert entry["content"] == [{"type": "text", "text": PARTIAL}]
        assert entry["stop_reason"] == "interrupted" and entry["is_error"] is True
        assert await session.live_scopes() == []
    finally:
        await repo.close()
