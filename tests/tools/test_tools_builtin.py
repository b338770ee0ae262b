"""The built-in tools through the real harness: bash, read, grep, pytest."""

from __future__ import annotations

import asyncio
import base64
import copy
import sys
from pathlib import Path
from typing import Any

import pytest

from toolfold.chord import apply, is_base
from toolfold.execenv import LocalExecEnv
from toolfold.harness import (
    CANCELLED_MARKER,
    EventBus,
    HarnessEvent,
    ToolContext,
    ToolEnd,
    ToolResult,
    ToolUpdate,
    execute_tool_call,
)
from toolfold.tools import BASH, GREP, PYTEST, READ, builtin_tools

TEXT = ["content", 0, "text"]


async def call(
    tool: Any, args: dict[str, Any], tmp_path: Path, cancel: asyncio.Event | None = None
) -> tuple[ToolResult, list[HarnessEvent]]:
    bus = EventBus()
    events: list[HarnessEvent] = []
    bus.add_listener(events.append)
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    result = await execute_tool_call(
        tool, "c1", args, run_id="r", turn_id="t", bus=bus, context=context, cancel=cancel
    )
    return result, events


def fold(events: list[HarnessEvent]) -> Any:
    state: Any = None
    for e in events:
        if isinstance(e, ToolUpdate):
            state = apply(state, copy.deepcopy(e.ops))
    return state


def test_builtin_tools_have_distinct_names_and_schemas() -> None:
    tools = builtin_tools()
    assert [t.name for t in tools] == [
        "bash",
        "read",
        "grep",
        "pytest",
        "bash_read",
        "bash_write",
        "bash_signal",
        "bash_stop",
        "bash_list",
    ]
    for t in tools:
        assert t.description and t.json_schema()["type"] == "object"
    assert BASH.output.retain == "tail" and READ.output.retain == "head"
    assert GREP.output.retain == "head" and PYTEST.output.retain == "tail"


async def test_bash_runs_and_the_fold_is_the_result(tmp_path: Path) -> None:
    result, events = await call(BASH, {"command": "echo hello; echo err >&2"}, tmp_path)
    assert not result.is_error
    assert result.text == "hello\nerr\n"
    assert result.details == {"exit_code": 0}
    assert fold(events) == result.state


async def test_bash_non_zero_exit_fails_with_the_code_and_keeps_output(tmp_path: Path) -> None:
    result, _ = await call(BASH, {"command": "echo partial; exit 3"}, tmp_path)
    assert result.is_error and result.outcome == "error"
    assert result.text == "partial\nCommand exited with code 3"


async def test_bash_large_output_streams_deltas_with_a_footer_and_spill(tmp_path: Path) -> None:
    # ~280 KB of varied lines into the 50 KB tail window.
    command = (
        f'{sys.executable} -c "import sys\n'
        "for i in range(5000): sys.stdout.write(f'[{i:05d}] build step {i * 7919 % 10007} ok\\\\n')\""
    )
    result, events = await call(BASH, {"command": command}, tmp_path)
    assert not result.is_error, result.text[-300:]
    state = result.state
    assert state is not None
    t = state["truncation"]
    assert t["truncated"] and t["total_lines"] == 5000
    assert result.text.rstrip().endswith(f"Full output: {state['spill_path']}]")
    assert "[Showing lines " in result.text
    assert Path(state["spill_path"]).read_text().count("\n") == 5000
    updates = [e for e in events if isinstance(e, ToolUpdate)]
    assert is_base(updates[0].ops)
    for u in updates[1:]:
        assert not is_base(u.ops)
    assert fold(events) == state


async def test_bash_timeout_keeps_partial_output(tmp_path: Path) -> None:
    result, _ = await call(BASH, {"command": "echo started; sleep 30", "timeout": 0.5}, tmp_path)
    assert result.is_error
    assert result.text.startswith("started\n")
    assert result.text.endswith("Command timed out after 0.5 seconds")


async def test_bash_cancel_mid_stream_keeps_partial_output(tmp_path: Path) -> None:
    bus = EventBus()
    saw_output = asyncio.Event()
    events: list[HarnessEvent] = []

    def listen(e: HarnessEvent) -> None:
        events.append(e)
        if isinstance(e, ToolUpdate) and any(
            op[0] == "a" and "tick" in op[-1] for op in e.ops if isinstance(op[-1], str)
        ):
            saw_output.set()

    bus.add_listener(listen)
    cancel = asyncio.Event()
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    task = asyncio.create_task(
        execute_tool_call(
            BASH,
            "c1",
            {"command": "while true; do echo tick; sleep 0.05; done"},
            run_id="r",
            turn_id="t",
            bus=bus,
            context=context,
            cancel=cancel,
        )
    )
    await saw_output.wait()
    cancel.set()
    result = await task
    assert result.outcome == "cancelled"
    assert result.text.startswith("tick\n") and result.text.endswith(CANCELLED_MARKER)
    assert fold(events) == result.state
    assert not any(
        isinstance(e, ToolUpdate) for e in events[events.index(ToolEnd("r", "t", "c1", True)) :]
    )


async def test_bash_without_an_environment_says_how_to_configure_one(tmp_path: Path) -> None:
    result = await execute_tool_call(
        BASH, "c1", {"command": "true"}, run_id="r", turn_id="t", bus=EventBus()
    )
    assert "bash needs an execution environment" in result.text and result.is_error


async def test_read_head_offset_limit_and_continuation(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    result, _ = await call(READ, {"path": "f.txt", "offset": 3, "limit": 2}, tmp_path)
    assert (
        result.text
        == "line 3\nline 4\n[Showing lines 3-4. More lines follow; use offset=5 to continue.]"
    )
    result, _ = await call(READ, {"path": "f.txt"}, tmp_path)
    assert result.text == "".join(f"line {i}\n" for i in range(1, 11))


async def test_read_a_big_file_keeps_the_head_with_exact_totals(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"row {i:06d}\n" for i in range(100_000)))
    result, events = await call(READ, {"path": "big.txt"}, tmp_path)
    assert result.state is not None
    t = result.state["truncation"]
    assert t["truncated"] and t["truncated_by"] == "lines"
    assert t["total_lines"] == 100_000 and t["output_lines"] == 2000
    assert result.text.startswith("row 000000\n")
    assert result.text.endswith(
        "[Showing lines 1-2,000 of 100,000 (21 KiB of 1.0 MiB). Use offset=2001 to continue.]"
    )
    assert fold(events) == result.state


async def test_read_from_an_offset_in_a_big_file_counts_the_whole_file(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"".join(b"r%06d \xff\n" % i for i in range(30_000)))
    result, _ = await call(READ, {"path": "big.txt", "offset": 101}, tmp_path)
    assert result.text.startswith("r000100 \ufffd\n")  # invalid UTF-8 shows as U+FFFD
    assert result.text.endswith(
        "[Showing lines 101-2,100 of 30,000 (23 KiB of 350 KiB). Use offset=2101 to continue.]"
    )
    result, _ = await call(READ, {"path": "big.txt", "offset": 30_001}, tmp_path)
    assert result.is_error and result.text.startswith("offset 30001 is past the end of")


async def test_read_image_files_become_image_blocks(tmp_path: Path) -> None:
    raw = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    (tmp_path / "pic.png").write_bytes(raw)
    result, _ = await call(READ, {"path": "pic.png"}, tmp_path)
    assert result.content[1] == {
        "type": "image",
        "data": base64.b64encode(raw).decode(),
        "mime_type": "image/png",
    }
    assert result.text == f"Read image file pic.png [image/png, {len(raw)} bytes]"


async def test_read_errors_name_the_path(tmp_path: Path) -> None:
    result, _ = await call(READ, {"path": "missing.txt"}, tmp_path)
    assert result.is_error and result.text == f"File not found: {tmp_path / 'missing.txt'}"


async def test_grep_finds_matches_skips_binaries_and_reports_counts(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import os\nTODO: fix\nx = 1\n")
    (tmp_path / "src" / "b.txt").write_text("todo later\n")
    (tmp_path / "src" / "bin.dat").write_bytes(b"TODO\0\0")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x").write_text("TODO hidden\n")
    result, _ = await call(GREP, {"pattern": "todo", "ignore_case": True}, tmp_path)
    assert result.text == "src/a.py:2:TODO: fix\nsrc/b.txt:1:todo later\n"
    assert result.details == {"matches": 2, "files": 2, "searched": 3}
    result, _ = await call(GREP, {"pattern": "TODO", "glob": "*.py"}, tmp_path)
    assert result.text == "src/a.py:2:TODO: fix\n"
    result, _ = await call(GREP, {"pattern": "(", "path": "src"}, tmp_path)
    assert result.is_error and result.text.startswith("Invalid regular expression '('")


async def test_pytest_tool_updates_details_live(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(
        "def test_one():\n    assert True\n\n"
        "def test_two():\n    assert 1 == 2, 'two is not one'\n\n"
        "def test_three():\n    pass\n"
    )
    result, events = await call(PYTEST, {"path": "test_sample.py"}, tmp_path)
    assert result.is_error
    assert result.text.endswith("pytest exited with code 1: 2 passed, 1 failed, 0 skipped of 3")
    d = result.details
    assert (d["total"], d["passed"], d["failed"], d["skipped"]) == (3, 2, 1, 0)
    assert "current" not in d
    assert d["failures"][0]["name"] == "test_sample.py::test_two"
    assert "two is not one" in d["failures"][0]["message"]
    ops = [op for e in events if isinstance(e, ToolUpdate) for op in e.ops]
    detail_ops = [op for op in ops if op[0] != "r" and op[1][:1] == ["details"]]
    # Progress is granular: counters are sets, the failure a splice, `current` deleted.
    assert ["d", ["details", "current"]] in detail_ops
    assert any(op[0] == "p" and op[1] == ["details", "failures"] for op in detail_ops)
    assert fold(events) == result.state


async def test_pytest_tool_passing_run_is_ok(tmp_path: Path) -> None:
    (tmp_path / "test_ok.py").write_text("def test_a():\n    pass\n")
    result, _ = await call(PYTEST, {"path": "test_ok.py"}, tmp_path)
    assert not result.is_error, result.text
    assert result.details["passed"] == 1 and result.details["failures"] == []


@pytest.mark.parametrize("args", [{"path": "nothing_here.py"}])
async def test_pytest_tool_no_tests_is_an_error(tmp_path: Path, args: dict[str, Any]) -> None:
    (tmp_path / "nothing_here.py").write_text("x = 1\n")
    result, _ = await call(PYTEST, args, tmp_path)
    assert result.is_error and "pytest collected no tests in 'nothing_here.py'" in result.text


async def test_pytest_tool_cancel_kills_the_run_and_keeps_progress(tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text(
        "import time\n\ndef test_fast():\n    pass\n\ndef test_slow():\n    time.sleep(60)\n"
    )
    bus = EventBus()
    events: list[HarnessEvent] = []
    slow_started = asyncio.Event()

    def listen(e: HarnessEvent) -> None:
        events.append(e)
        if (
            isinstance(e, ToolUpdate)
            and ["s", ["details", "current"], "test_slow.py::test_slow"] in e.ops
        ):
            slow_started.set()

    bus.add_listener(listen)
    cancel = asyncio.Event()
    context = ToolContext(env=LocalExecEnv(tmp_path / "spill"), cwd=tmp_path)
    task = asyncio.create_task(
        execute_tool_call(
            PYTEST,
            "c1",
            {"path": "test_slow.py"},
            run_id="r",
            turn_id="t",
            bus=bus,
            context=context,
            cancel=cancel,
        )
    )
    await slow_started.wait()
    cancel.set()
    result = await task
    assert result.outcome == "cancelled" and result.text.endswith(CANCELLED_MARKER)
    assert result.details["passed"] == 1 and "current" not in result.details
    assert fold(events) == result.state


@pytest.mark.parametrize("retain", ["tail", "head"])
async def test_bash_footer_never_costs_a_window_line_nor_gets_cut(
    tmp_path: Path, retain: str
) -> None:
    from dataclasses import replace

    from toolfold.output import OutputPolicy

    tool = replace(BASH, output=OutputPolicy(retain=retain, max_lines=3))  # type: ignore[arg-type]
    result, events = await call(tool, {"command": "seq 1 10"}, tmp_path)
    text = result.content[0]["text"]
    body, footer = text.rsplit("\n[", 1)
    expected = "8\n9\n10" if retain == "tail" else "1\n2\n3"
    assert body == expected, text
    shown = "Showing lines 8-10 of 10" if retain == "tail" else "Showing lines 1-3 of 10"
    assert shown in footer and "Full output: " in footer, footer
    # bash's own footer replaces the standard cut notice: one note, not two
    assert text.count("[Showing") == 1 and "were cut]" not in text, text
    assert fold(events) == result.state


async def test_bash_says_when_background_processes_were_stopped(tmp_path: Path) -> None:
    result, _ = await call(BASH, {"command": "sleep 300 & echo started"}, tmp_path)
    text = result.content[0]["text"]
    assert text.startswith("started\n")
    assert "Background processes still holding the output were stopped" in text
    assert not result.is_error and result.details["exit_code"] == 0
