"""A tool that fails the request itself (``toolfold.mcp.ProtocolError``), against the
official SDK client: without a task the ``tools/call`` answers with that JSON-RPC
error; a task ends ``failed`` with it (no result), also when the server that ran it was
killed with ``kill -9`` and a new one answers. Any other exception stays the tool's
own failure: an ``isError`` result, a ``completed`` task."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.exceptions import MCPError
from mcp_helpers import calls, connect, http_server, text_of
from task_client import TaskHandle, TaskState, call, get, tasks_over_http, tasks_over_stdio
from task_tools import REFUSAL
from test_mcp_tasks import pending_texts, until, until_status

from toolfold.mcp import ProtocolError
from toolfold.mcp._protocol_errors import MAX_DATA_CHARS, MAX_MESSAGE_CHARS, error_object

HERE = str(Path(__file__).parent)
TOOLS = ("--tools", "task_tools:TOOLS")
CODE, MESSAGE, DATA = REFUSAL
ERROR = {"code": CODE, "message": MESSAGE, "data": DATA}


@pytest.fixture(autouse=True)
def _importable_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    # The servers import task_tools (--tools) from this directory.
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _stored_text(view: Any) -> str:
    message = view.message if isinstance(view.message, dict) else {}
    return str((message.get("content") or [{}])[0].get("text", ""))


async def test_without_a_task_the_call_answers_with_the_json_rpc_error(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        # A 2025-era client, then a 2026-07-28 one whose call is quick enough to be
        # answered at once: the same JSON-RPC error for both.
        async with connect(tmp_path, *TOOLS, "--task-after", "0") as legacy:
            with pytest.raises(MCPError) as old:
                await legacy.call_tool("refuse", {})
            plain = await legacy.call_tool("refuse", {"plain": True})
            after = await legacy.call_tool("gated", {"gate": HERE})
        async with tasks_over_stdio(tmp_path, *TOOLS, "--task-after", "60") as modern:
            with pytest.raises(MCPError) as new:
                await call(modern, "refuse", {})
    for raised in (old, new):
        assert raised.value.error.code == CODE
        assert raised.value.error.message == MESSAGE
        assert raised.value.error.data == DATA
    # Any other exception is the tool's own failure, and the next call works.
    assert isinstance(plain, types.CallToolResult) and plain.is_error is True
    assert "RuntimeError: the backend refused the job" in text_of(plain)
    assert after.is_error is False and "through the gate" in text_of(after)
    # The calls are in the store, with the output they wrote and the error.
    stored = [c for c in await calls(tmp_path) if c.tool_name == "refuse"]
    assert [c.status for c in stored] == ["error", "error", "error"]
    assert all(_stored_text(c).startswith("asking the backend\n") for c in stored)
    assert "ProtocolError: the backend refused the job" in _stored_text(stored[0])


async def test_a_task_ends_failed_with_the_error_and_no_result(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        async with tasks_over_stdio(tmp_path, *TOOLS, "--task-after", "0") as client:
            refused = await call(client, "refuse", {})
            plain = await call(client, "refuse", {"plain": True})
            failed = await until_status(client, refused.task_id, "completed", "failed")
            completed = await until_status(client, plain.task_id, "completed", "failed")
    assert isinstance(refused, TaskHandle) and refused.status == "working"
    assert failed.status == "failed" and failed.result is None
    assert failed.error == ERROR
    assert completed.status == "completed" and completed.error is None
    assert completed.result is not None and completed.result["isError"] is True


def _kill(proc: Any) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


async def test_after_kill_9_a_new_server_answers_failed_with_the_same_error(
    tmp_path: Path,
) -> None:
    # One task failed before the kill (its record says so); the other was still
    # waiting for its gate: the new server runs it again (replay-safe), and it fails
    # the same way, from the store's record of its settlement.
    gate = tmp_path / "gate"
    with anyio.fail_after(180):
        with http_server(tmp_path, *TOOLS, "--task-after", "0", session="old") as (url, proc):
            async with tasks_over_http(url) as client:
                ended = await call(client, "refuse", {})
                before = await until_status(client, ended.task_id, "failed", "completed")
                waiting = await call(client, "refuse", {"gate": str(gate)})

                async def checkpointed() -> bool:
                    texts = await pending_texts(tmp_path, "old")
                    return any("asking the backend" in t for t in texts)

                await until(checkpointed, "a durable checkpoint of the waiting call")
                _kill(proc)
        gate.touch()
        with http_server(tmp_path, *TOOLS, session="new") as (url, _):
            async with tasks_over_http(url) as client:
                again = await get(client, ended.task_id)
                rerun = await until_status(client, waiting.task_id, "failed", "completed")

                async def settled() -> TaskState | None:
                    state = await get(client, waiting.task_id)
                    return state if state.status == "failed" else None

                # Asked again once settled: the answer now comes from the task record.
                kept = await until(settled, "the re-run task's record")
    assert before.status == "failed" and before.error == ERROR
    for state in (again, rerun, kept):
        assert state.status == "failed" and state.error == ERROR and state.result is None
    assert {c.status for c in await calls(tmp_path, "old")} == {"error"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=60,
)


@given(data=json_values, message=st.text(max_size=6000))
def test_the_error_kept_is_bounded_and_otherwise_as_raised(data: Any, message: str) -> None:
    kept = error_object(ProtocolError(7, message, data))
    assert kept["code"] == 7 and len(kept["message"]) <= MAX_MESSAGE_CHARS
    assert kept["message"] == message or len(message) > MAX_MESSAGE_CHARS
    if "data" in kept:
        assert kept["data"] == data and len(json.dumps(data)) <= MAX_DATA_CHARS


def test_data_too_big_too_deep_or_not_json_is_left_out() -> None:
    deep: Any = 0
    for _ in range(5000):
        deep = [deep]
    for data in (deep, "x" * (MAX_DATA_CHARS + 1), {"when": object()}, [[[[[[[[[[1]]]]]]]]]]):
        kept = error_object(ProtocolError(-32000, "no", data))
        assert kept == {"code": -32000, "message": "no"}
    cut = error_object(ProtocolError(1, "m" * 10_000))["message"]
    assert cut.endswith(" [error text cut]") and len(cut) == MAX_MESSAGE_CHARS - 3
