"""A head_tail bash window through every adapter: the model receives the start, the one
cut-marker line and the end, exactly the settled result's text."""

from __future__ import annotations

from pathlib import Path

import pytest
from integrations_helpers import FRAMEWORKS, drive

from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext
from toolfold.integrations import ToolLoop
from toolfold.output import OutputPolicy
from toolfold.tools import bash_tool

pytestmark = pytest.mark.parametrize("framework", FRAMEWORKS)


async def test_the_model_sees_the_start_the_marker_and_the_end(
    framework: str, tmp_path: Path
) -> None:
    policy = OutputPolicy(retain="head_tail", max_lines=100, max_bytes=50_000)
    bash = bash_tool(output=policy)
    loop = ToolLoop([bash], context=ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path))
    t = await drive(framework, loop, [[("c1", "bash", {"command": "seq 1 5000"})], "done"])
    [result] = loop.results
    seen = t.seen["c1"]
    assert seen == result.text  # what the model got is the settled result, unchanged
    lines = seen.splitlines()
    assert lines[:20] == [str(i) for i in range(1, 21)]  # the head: 20 % of 100 lines
    markers = [line for line in lines if "cut here" in line]
    assert len(markers) == 1 and "offset=21" in markers[0], markers
    assert "4999" in lines and "5000" in lines  # the tail
    assert str(2500) not in lines  # the middle is cut
    assert t.final == "done"
