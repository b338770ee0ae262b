"""``bash`` with ``retain="head_tail"``: a real command, its start and end, the cut between.

The marker names the spill file and the first cut line, and that line of the spill file
is exactly the first one the text does not show; the fold of the streamed ops is the
result; the head part is only ever appended to and the tail part rolls by ``t`` + ``a``.
"""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path
from typing import Any

from toolfold.chord import apply, is_base
from toolfold.execenv import LocalExecEnv
from toolfold.harness import EventBus, HarnessEvent, ToolContext, ToolUpdate, execute_tool_call
from toolfold.output import OutputPolicy, output_text
from toolfold.tools import bash_tool

HEAD, MARKER, TAIL = (["content", i, "text"] for i in range(3))


async def _run(command: str, policy: OutputPolicy, tmp_path: Path) -> tuple[Any, list[Any]]:
    bus = EventBus()
    events: list[HarnessEvent] = []
    bus.add_listener(events.append)
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    result = await execute_tool_call(
        bash_tool(output=policy),
        "c1",
        {"command": command},
        run_id="r",
        turn_id="t",
        bus=bus,
        context=context,
    )
    return result, events


async def test_a_long_run_shows_its_start_and_end_and_reads_on_at_the_first_cut_line(
    tmp_path: Path,
) -> None:
    # A compiler-like run: the first error at the top, thousands of lines, a summary.
    command = (
        f'{sys.executable} -c "import sys\n'
        "print('main.c:3: error: first error')\n"
        "for i in range(6000): print(f'[{i:05d}] warning: noise {i * 7919 % 10007}')\n"
        "print('6000 warnings and 1 error generated.')\""
    )
    policy = OutputPolicy(retain="head_tail", max_bytes=20_000, max_lines=500)
    result, events = await _run(command, policy, tmp_path)
    state = result.state
    assert state is not None
    text = result.text
    assert text == output_text(state)
    assert text.startswith("main.c:3: error: first error\n")
    assert "6000 warnings and 1 error generated.\n" in text
    t = state["truncation"]
    assert t["truncated"] and t["total_lines"] == 6002
    assert t["output_lines"] <= 500 and t["output_bytes"] <= 20_000
    head, marker, tail = (block["text"] for block in state["content"][:3])
    assert head.count("\n") == 100  # 20 % of 500 lines
    spill = Path(state["spill_path"])
    match = re.search(r"read on from line ([\d,]+) \(offset=(\d+)\)", marker)
    assert match and f"Full output: {spill}" in marker
    first_cut = int(match.group(2))
    assert first_cut == t["cut_line"] == 101
    lines = spill.read_text().splitlines(keepends=True)
    assert "".join(lines[: first_cut - 1]) == head  # everything before the cut is shown
    assert lines[first_cut - 1] not in tail  # and the first cut line is not
    last_cut = first_cut + t["cut_lines"] - 1
    assert tail.startswith(lines[last_cut])  # the tail starts right after the cut
    assert f"Showing lines 1-100 and {last_cut + 1:,}-6,002 of 6,002" in tail
    # The stream: one base, then the head only grows, the marker is set, the tail rolls.
    updates = [e for e in events if isinstance(e, ToolUpdate)]
    assert is_base(updates[0].ops)
    replica: Any = None
    for u in updates:
        ops = copy.deepcopy(u.ops)
        if not is_base(ops):
            for op in ops:
                if op[1] == HEAD:
                    assert op[0] == "a", op[:2]
                elif op[1] == MARKER:
                    assert op[0] == "s", op[:2]
        replica = apply(replica, ops)
    assert replica == state


async def test_small_output_is_untouched(tmp_path: Path) -> None:
    policy = OutputPolicy(retain="head_tail", max_bytes=20_000, max_lines=500)
    result, events = await _run("seq 1 300", policy, tmp_path)
    assert result.text == "".join(f"{i}\n" for i in range(1, 301))
    state = result.state
    assert state is not None and not state["truncation"]["truncated"]
    assert "spill_path" not in state
    replica: Any = None
    for e in events:
        if isinstance(e, ToolUpdate):
            replica = apply(replica, copy.deepcopy(e.ops))
    assert replica == state
