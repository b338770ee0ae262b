"""``toolfold mcp --bash-retain head_tail`` end to end: the official SDK client calls the
built-in ``bash`` of a real server subprocess and gets the start and the end of a long
output with one marker line between them, and the hint to read on from the cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp_helpers import connect, text_of

from toolfold.execenv import DEFAULT_HEAD_SHARE, head_tail_window
from toolfold.tools import BASH

LINES = 5_000


@pytest.mark.parametrize("share", [None, 0.5])
async def test_a_long_bash_output_keeps_its_start_and_end_with_one_cut_marker(
    tmp_path: Path, share: float | None
) -> None:
    args = ["--bash-retain", "head_tail"]
    if share is not None:
        args += ["--head-share", str(share)]
    full = "".join(f"line {i}\n" for i in range(1, LINES + 1))
    # What the window must hold: the exec env's reference rule under bash's own caps.
    cut = head_tail_window(
        full, BASH.output.max_bytes, BASH.output.max_lines, share or DEFAULT_HEAD_SHARE
    )
    assert cut is not None
    head, tail, partial = cut
    assert not partial
    first_cut = head.count("\n") + 1
    last_shown = LINES - tail.count("\n") + 1  # the first line of the tail part
    async with connect(tmp_path, *args) as client:
        result = await client.call_tool("bash", {"command": f"seq -f 'line %g' 1 {LINES}"})
        assert not result.is_error
        text = text_of(result)
        markers = [line for line in text.splitlines() if line.startswith("[... ")]
        assert len(markers) == 1, markers
        [marker] = markers
        before, after = text.split(marker + "\n", 1)
        assert before == head  # the first lines, exactly
        assert after.startswith(tail)  # the last lines, exactly
        assert f"cut here: lines {first_cut:,}-{last_shown - 1:,} of {LINES:,}" in marker
        assert f"read on from line {first_cut:,} (offset={first_cut})" in marker
        footer = after[len(tail) :]
        assert footer.startswith(f"[Showing lines 1-{first_cut - 1:,} and {last_shown:,}-")
        spill = result.structured_content["spill_path"]  # type: ignore[index]
        assert f"Full output: {spill}" in marker
        hint = footer.splitlines()[-1]
        assert hint.startswith(f'[To see the rest, call read with path="{spill}"')
        assert f"offset={first_cut};" in hint
        # Reading on where the marker and the hint say gives the first line not shown.
        page = await client.call_tool("read", {"path": spill, "offset": first_cut, "limit": 2})
        assert text_of(page).startswith(f"line {first_cut}\nline {first_cut + 1}\n")
    assert Path(spill).read_text() == full
    if share is not None:  # the share moved the cut: half of the lines for the start
        assert first_cut - 1 == int(BASH.output.max_lines * share)
