"""``bash`` with a yield and the tools for background commands, through the real harness."""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolfold.execenv import LocalExecEnv
from toolfold.harness import EventBus, ToolContext, ToolResult, execute_tool_call
from toolfold.tools import BASH
from toolfold.tools.bash_background import (
    BASH_LIST,
    BASH_READ,
    BASH_SIGNAL,
    BASH_STOP,
    BASH_WRITE,
)

PY = sys.executable
BOUND = 60


@pytest.fixture
async def context(tmp_path: Path) -> AsyncIterator[ToolContext]:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)
    yield ToolContext(env=env, cwd=tmp_path)
    await env.aclose()


async def call(tool: Any, args: dict[str, Any], context: ToolContext) -> ToolResult:
    return await execute_tool_call(
        tool, "c1", args, run_id="r", turn_id="t", bus=EventBus(), context=context
    )


def test_the_bash_schema_shows_the_yield_default_and_tty() -> None:
    props = BASH.json_schema()["properties"]
    assert props["yield_after"]["default"] == 10.0
    assert props["yield_after"]["anyOf"][0]["maximum"] == 120.0
    assert props["tty"]["default"] is False
    assert BASH_READ.json_schema()["properties"]["wait"]["default"] == 0.0
    assert BASH_WRITE.json_schema()["required"] == ["handle", "input"]


async def test_a_dev_server_through_the_tools(context: ToolContext) -> None:
    started = await call(
        BASH,
        {"command": f"exec {PY} -u -m http.server --bind 127.0.0.1 0", "yield_after": 0.3},
        context,
    )
    assert not started.is_error
    handle = started.details["handle"]
    assert started.details["running"] is True and started.details["exit_code"] is None
    assert f"in the background as {handle}" in started.text
    text = started.text
    while "Serving HTTP" not in text:
        read = await call(
            BASH_READ, {"handle": handle, "wait": BOUND, "until": "Serving HTTP"}, context
        )
        text += read.text
    port = re.search(r"port (\d+)", text).group(1)  # type: ignore[union-attr]
    fetched = await call(
        BASH,
        {
            "command": f"{PY} -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/')\""
        },
        context,
    )
    assert not fetched.is_error and "handle" not in fetched.details
    log = await call(BASH_READ, {"handle": handle}, context)
    assert '"GET / HTTP/1.1" 200' in log.text
    assert f"{handle} is still running" in log.text
    assert log.details["running"] is True and log.details["new_bytes"] > 0
    listed = await call(BASH_LIST, {}, context)
    assert listed.text.startswith(f"{handle}\trunning\t")
    assert [c["handle"] for c in listed.details["commands"]] == [handle]
    stopped = await call(BASH_STOP, {"handle": handle}, context)
    assert f"{handle} was stopped" in stopped.text
    assert stopped.details["ended"] == "stopped"
    assert (await call(BASH_LIST, {}, context)).text == "No background commands.\n"
    gone = await call(BASH_READ, {"handle": handle}, context)
    assert gone.is_error and f"no background command '{handle}'" in gone.text


async def test_a_prompt_answered_with_bash_write(context: ToolContext) -> None:
    script = "a = input('Proceed? [y/N] '); print('answer:', a)"
    started = await call(BASH, {"command": f'{PY} -c "{script}"', "yield_after": 0.3}, context)
    handle = started.details["handle"]
    answered = await call(BASH_WRITE, {"handle": handle, "input": "y\n", "wait": BOUND}, context)
    assert "answer: y\n" in answered.text
    assert f"{handle} exited with code 0" in answered.text
    assert answered.details["exit_code"] == 0


async def test_ctrl_c_with_bash_signal(context: ToolContext) -> None:
    started = await call(BASH, {"command": "exec sleep 1000", "yield_after": 0.2}, context)
    handle = started.details["handle"]
    ended = await call(BASH_SIGNAL, {"handle": handle, "signal": "INT", "wait": BOUND}, context)
    assert f"{handle} was ended by a signal" in ended.text
    bad = await call(BASH_SIGNAL, {"handle": handle, "signal": "INT"}, context)
    assert bad.is_error and "no background command" in bad.text


async def test_yield_null_waits_for_the_end(context: ToolContext) -> None:
    result = await call(BASH, {"command": "sleep 0.5; echo done", "yield_after": None}, context)
    assert result.text == "done\n" and result.details == {"exit_code": 0}


async def test_the_background_limit_is_a_tool_error(tmp_path: Path) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, max_background=1)
    context = ToolContext(env=env, cwd=tmp_path)
    first = await call(BASH, {"command": "exec sleep 1000", "yield_after": 0.2}, context)
    assert first.details["running"]
    refused = await call(BASH, {"command": "echo hi", "yield_after": 0.2}, context)
    assert refused.is_error
    assert "the limit is 1" in refused.text and "stop one" in refused.text
    await env.aclose()
