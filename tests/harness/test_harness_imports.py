"""What the harness's and history's loop-free parts import: the settled result
(``harness._result``), the run records (``history``) and the definitions a tool is made
of (``Tool``, ``ToolContext``, ``ToolCall``, ``CallInfo``, ``ToolError``) load no event
loop and none of the harness's events, bus or durable hooks, so a host that drives a
command without asyncio (a bare ``toolfold run -- CMD``) builds the same results and
records as the harness.
An assertion about behaviour (the modules a fresh process loads), not timing."""

from __future__ import annotations

import pytest

from fresh_modules import modules_after

LOOP_PARTS = (
    "asyncio",
    "toolfold.harness.events",
    "toolfold.harness._bus",
    "toolfold.harness._execute",
    "toolfold.harness._durable_hooks",
    "toolfold.harness._background_call",
    "toolfold.durability",
)
"""What a loop-free use of the harness or history must not import (the call lifecycle's
seam, ``_hooks``, and the tools' context are loop-free: their methods run on the loop,
their definitions do not)."""

LOOP_FREE = {
    # the settled result, its transcript entry, the call description, the markers
    "result": (
        "from toolfold.harness._result import INTERRUPTION_MARKER, ToolResult, describe_call\n"
        "m = ToolResult('c1', 'bash', [{'type': 'text', 'text': 'hi'}]).to_message()\n"
        "assert m.to_json()['content'][0]['text'] == 'hi'\n"
        "assert describe_call({'command': 'true'}) == 'true' and INTERRUPTION_MARKER\n",
        "from toolfold.output import output_text",
    ),
    # the run records a host writes at a call's start and settlement
    "records": (
        "import os, tempfile\n"
        "from toolfold.history import (\n"
        "    mark_activity, new_run_record, run_record_address, settled_record)\n"
        "record = new_run_record('true', '/tmp/spill', '2026-01-01T00:00:00.000+00:00')\n"
        "settled_record('c1', record, {'spill_path': None})\n"
        "run_record_address('c1')\n"
        "mark_activity(os.path.join(tempfile.mkdtemp(), 'spill'))\n",
        "from toolfold._fsperm import make_private_dirs\n"
        "from toolfold.storage import SESSION, ValueAddress, set_value, value",
    ),
    # a tool's definition, its context, a call's identity, a failure's notice
    "definitions": (
        "from toolfold.harness import CallInfo, Tool, ToolCall, ToolContext, ToolError\n"
        "from toolfold.harness._result import error_text\n"
        "class Params:\n"
        "    @classmethod\n"
        "    def model_validate(cls, obj): return cls()\n"
        "    @classmethod\n"
        "    def model_json_schema(cls): return {}\n"
        "async def execute(tool_call_id, params, cancel, out, context):\n"
        "    'Does nothing.'\n"
        "assert Tool('t', 'Does nothing.', Params, execute).definition()['name'] == 't'\n"
        "ToolContext().for_call(run_id='r', turn_id='u', tool_call_id='c')\n"
        "ToolCall('c', 't'), CallInfo('r', 'u', 'c', 't', {}, False)\n"
        "assert error_text(ToolError('no')) == 'no'\n"
        "assert error_text(ValueError('x' * 5000)).endswith('[error text cut]')\n",
        "from toolfold.output import OutputPolicy",
    ),
}
"""Code using a loop-free part, and what it imports of the layers below."""


OWN_MODULES = {
    "result": ["toolfold.harness", "toolfold.harness._errors", "toolfold.harness._result"],
    "records": ["toolfold.history", "toolfold.history._records"],
    "definitions": [
        "toolfold.harness",
        "toolfold.harness._context",
        "toolfold.harness._errors",
        "toolfold.harness._hooks",
        "toolfold.harness._result",
        "toolfold.harness._tools",
    ],
}
"""The modules of the harness and history each part loads: its own, and nothing else."""


def loop_parts(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in LOOP_PARTS))


@pytest.mark.parametrize("part", sorted(LOOP_FREE))
def test_a_loop_free_part_imports_no_loop_and_no_event(part: str) -> None:
    code, _ = LOOP_FREE[part]
    assert loop_parts(modules_after(code)) == []


@pytest.mark.parametrize("part", sorted(LOOP_FREE))
def test_a_loop_free_part_adds_nothing_of_the_harness(part: str) -> None:
    """Whatever the layers below import, the harness and history add only the part."""
    code, below = LOOP_FREE[part]
    added = modules_after(code) - modules_after(below)
    ours = sorted(m for m in added if m.startswith(("toolfold.harness", "toolfold.history")))
    assert ours == OWN_MODULES[part]
    assert [m for m in added if m.split(".")[0] == "asyncio"] == []
    assert not [m for m in added if m.startswith("toolfold.durability")]


def test_the_harness_package_imports_its_names_on_first_use() -> None:
    modules = modules_after("import toolfold.harness")
    assert sorted(m for m in modules if m.startswith("toolfold")) == [
        "toolfold",
        "toolfold._lazy",
        "toolfold.harness",
    ]
    code = (
        "import toolfold.harness as h\n"
        "from toolfold.harness.events import ToolStart\n"
        "assert h.events.ToolStart is ToolStart and h.ToolStart is ToolStart\n"
        "assert h.Harness.__module__ == 'toolfold.harness._execute'\n"
    )
    modules = modules_after(code)
    assert "toolfold.harness._background_call" not in modules  # no command outlived a call
    assert "toolfold.harness._loop" not in modules


def test_an_assistant_message_s_events_are_defined_on_first_use() -> None:
    modules = modules_after("from toolfold.harness.events import RunStart, ToolSettled, ToolUpdate")
    assert "toolfold.harness._message_events" not in modules
    code = (
        "import typing\n"
        "from toolfold.harness import events, HarnessEvent, MessageStart\n"
        "from toolfold.harness.events import MessageEnd, MessageUpdate, RunStart, ToolEnd\n"
        "assert events.MessageStart is MessageStart and events.HarnessEvent is HarnessEvent\n"
        "assert len(typing.get_args(HarnessEvent)) == 9\n"
        "assert {MessageStart, MessageUpdate, MessageEnd, RunStart, ToolEnd} <= set(\n"
        "    typing.get_args(HarnessEvent))\n"
        "assert isinstance(MessageEnd('r', 't', 'm', 'stop'), HarnessEvent)\n"
    )
    assert "toolfold.harness._message_events" in modules_after(code)


def test_the_check_sees_the_loop() -> None:
    """The assertion above can fail: the harness itself does import the loop."""
    assert "asyncio" in loop_parts(modules_after("from toolfold.harness import Harness"))
