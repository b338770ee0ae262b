"""A call marks its session's activity (the spill directory's time, which the viewer's
landing page orders sessions by) at most once per ``ACTIVITY_MARK_INTERVAL``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolfold.mcp import _host
from toolfold.mcp._host import ACTIVITY_MARK_INTERVAL, McpHost, McpSettings
from toolfold.storage import MemoryRepository
from toolfold.tools import BASH


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The host's monotonic clock, set by the test (``clock[0]``)."""
    now = [1000.0]
    monkeypatch.setattr(_host, "monotonic", lambda: now[0])
    return now


async def _host_in(tmp_path: Path) -> tuple[McpHost, Path]:
    session = await MemoryRepository().open_session("s1", create=True)
    spill = tmp_path / "spill" / "s1"
    return McpHost(session, McpSettings("s1", spill, [BASH], cwd=tmp_path)), spill


async def test_a_mark_within_the_interval_of_the_last_is_skipped(
    tmp_path: Path, clock: list[float]
) -> None:
    host, spill = await _host_in(tmp_path)
    os.utime(spill, (0, 0))
    host._mark_activity()  # the first mark is made
    assert spill.stat().st_mtime > 0

    os.utime(spill, (0, 0))
    clock[0] += ACTIVITY_MARK_INTERVAL / 2
    host._mark_activity()  # too soon: left as it is
    assert spill.stat().st_mtime == 0

    clock[0] += ACTIVITY_MARK_INTERVAL / 2
    host._mark_activity()  # an interval after the last mark: made again
    assert spill.stat().st_mtime > 0


async def test_a_mark_remakes_a_spill_directory_removed_since_the_last(
    tmp_path: Path, clock: list[float]
) -> None:
    host, spill = await _host_in(tmp_path)
    host._mark_activity()
    spill.rmdir()
    clock[0] += ACTIVITY_MARK_INTERVAL
    host._mark_activity()
    assert spill.is_dir()
    assert (spill.stat().st_mode & 0o777) == 0o700
