"""kill -9 during a long tool call under each framework, then ``toolfold resume``
recovers the partial output (a real agent process, a real SQLite store)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from integrations_helpers import FRAMEWORKS  # puts the CLI tests' helpers on the path

from cli_helpers import clean_env, pending_text, toolfold, wait_for  # isort: skip

from toolfold.harness import INTERRUPTION_MARKER
from toolfold.storage import open_repository

CHILD = Path(__file__).resolve().parent / "crash_child.py"


async def entries(url: str, name: str) -> list[dict[str, object]]:
    repo = open_repository(url)
    try:
        session = await repo.open_session(name)
        return [e.value for e in await session.read_entries()]
    finally:
        await repo.close()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_kill_9_mid_call_then_resume_recovers_the_partial_output(
    framework: str, tmp_path: Path
) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), framework, url, "agent"],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        text = wait_for(
            lambda: pending_text(url, "agent"), "the first checkpoint", proc=proc, timeout=120
        )
        assert text == "partial before the stop\n"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert asyncio.run(entries(url, "agent")) == []  # nothing settled before the crash
    done = toolfold("resume", "agent", "--store", url, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [entry] = asyncio.run(entries(url, "agent"))
    assert entry["tool_call_id"] == "c1" and entry["outcome"] == "interrupted"
    assert entry["content"][0]["text"] == "partial before the stop\n" + INTERRUPTION_MARKER  # type: ignore[index]
