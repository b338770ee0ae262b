"""The task board's expiry without a transport: a hand-moved clock, and a spill path
from the store that must never make the server delete a file it does not own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from toolfold.history import run_record_address
from toolfold.mcp import TaskSettings
from toolfold.mcp._task_board import TaskBoard
from toolfold.mcp._tasks import TASK_NAMESPACE, expired, new_record, task_address
from toolfold.storage import Session, open_repository, set_value


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Host:
    """The least a board needs: a session and a spill root."""

    def __init__(self, session: Session, spill_root: Path) -> None:
        self.session = session
        self.session_name = "s1"
        self.spill_root = spill_root
        self.tools: list[Any] = []
        self.cwd = spill_root

    def result_for(self, tool: Any, result: Any, call_id: str) -> Any:
        raise AssertionError("not called")

    def tool_named(self, name: str) -> Any:
        return None

    def live_sink(self, call_id: str) -> Any:
        return None

    def cancel_call(self, call_id: str) -> bool:
        return False

    async def wait_call(self, call_id: str) -> None:
        return None

    def pending_input(self, call_id: str) -> dict[str, Any]:
        return {}

    def give_input(self, call_id: str, responses: dict[str, Any]) -> None:
        return None


async def ended_task(session: Session, key: str, call_id: str, spill: Path, clock: Clock) -> None:
    settings = TaskSettings(ttl_ms=60_000, clock=clock)
    record = new_record(call_id=call_id, tool="bash", scope="session:s1", settings=settings)
    record["status"] = "completed"
    run = {"command": "seq", "spill_path": str(spill)}
    await session.commit(
        [set_value(task_address(key), record), set_value(run_record_address(call_id), run)]
    )


@pytest.mark.parametrize("kind", ["ours", "outside", "symlink", "dir-symlink"])
async def test_expiry_removes_only_a_regular_spill_file_under_the_spill_root(
    tmp_path: Path, kind: str
) -> None:
    root = tmp_path / "spill"
    (root / "s1").mkdir(parents=True)
    victim = tmp_path / "precious.txt"  # outside the spill root
    victim.write_text("keep me")
    if kind == "ours":
        spill = root / "s1" / "exec-1.log"
        spill.write_text("output")
    elif kind == "outside":
        spill = victim
    elif kind == "symlink":
        spill = root / "s1" / "exec-1.log"
        spill.symlink_to(victim)
    else:
        (root / "s1" / "link").symlink_to(tmp_path)
        spill = root / "s1" / "link" / "precious.txt"
    clock = Clock()
    repo = open_repository("memory:")
    session = await repo.open_session("s1", create=True)
    board = TaskBoard(Host(session, root), TaskSettings(ttl_ms=60_000, clock=clock))
    await ended_task(session, "k" * 32, "mcp-1", spill, clock)
    assert await board.sweep() == 0  # not yet
    clock.now += 59.9
    assert await board.sweep() == 0
    clock.now += 0.1
    assert await board.sweep() == 1
    assert await session.scan_values(TASK_NAMESPACE) == []
    assert victim.read_text() == "keep me"
    if kind == "ours":
        assert not spill.exists()
    if kind == "symlink":
        assert os.path.islink(spill)  # left alone: never followed, never removed
    await repo.close()


def test_a_task_still_working_never_expires() -> None:
    settings = TaskSettings(ttl_ms=1, clock=lambda: 0.0)
    record = new_record(call_id="c", tool="bash", scope="s", settings=settings)
    assert not expired(record, 10_000.0)
    record["status"] = "failed"
    assert expired(record, 10_000.0)
