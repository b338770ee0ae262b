"""A tool that asks its client for input (``ask_client``): its call becomes a task at
once, ``input_required`` with the requests on ``tasks/get``, resumed by ``tasks/update``
(all answers at once, or one at a time), through ``toolfold mcp`` and through the proxy
passing an upstream's task through. The official SDK client on the 2026-07-28 wire."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_helpers import TOOLFOLD, calls, connect, proxy, store_url, text_of
from task_client import TaskHandle, call, get, task_session, tasks_over_stdio, update
from test_mcp_tasks import until_status

HERE = str(Path(__file__).parent)
TOOLS = ("--tools", "conformance_tools:TOOLS", "--no-builtin")
YES = {"action": "accept", "content": {"confirm": True}}


@pytest.fixture(autouse=True)
def _importable_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))


async def _confirm(client: ClientSession) -> tuple[dict[str, object], str]:
    """``confirm_delete`` as a task: its input requests, then the text it ends with."""
    handle = await call(client, "confirm_delete", {"filename": "a.txt"})
    assert isinstance(handle, TaskHandle)
    asking = await until_status(client, handle.task_id, "input_required")
    assert asking.input_requests is not None
    acked = await update(client, handle.task_id, {"confirm": YES})
    assert acked.result_type == "complete"
    done = await until_status(client, handle.task_id, "completed")
    assert done.result is not None and done.result["isError"] is False
    return asking.input_requests, done.result["content"][0]["text"]


async def test_a_tool_that_asks_is_input_required_until_answered(tmp_path: Path) -> None:
    # --task-after 3600: only the tool's asking makes the call a task this soon.
    with anyio.fail_after(120):
        async with tasks_over_stdio(tmp_path, *TOOLS, "--task-after", "3600") as client:
            requests, text = await _confirm(client)
            # Two requests at once, answered one at a time.
            handle = await call(client, "multi_input", {})
            both = await until_status(client, handle.task_id, "input_required")
            while len(both.input_requests or {}) < 2:
                both = await get(client, handle.task_id)
            await update(client, handle.task_id, {"first": YES, "unknown": YES})
            one_left = await get(client, handle.task_id)
            await update(client, handle.task_id, {"second": YES})
            done = await until_status(client, handle.task_id, "completed")
    assert list(requests) == ["confirm"]
    assert requests["confirm"]["method"] == "elicitation/create"  # type: ignore[index]
    assert text.startswith("a.txt: deleted")
    assert sorted(both.input_requests or {}) == ["first", "second"]
    assert one_left.status == "input_required" and list(one_left.input_requests or {}) == ["second"]
    assert done.result is not None
    assert done.result["content"][0]["text"].startswith("answered: ['first', 'second']")


async def test_a_call_that_cannot_be_a_task_cannot_ask(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with connect(tmp_path, *TOOLS) as client:
            result = await client.call_tool("confirm_delete", {"filename": "a.txt"})
    assert result.is_error is True
    assert "cannot ask its client for input" in text_of(result)


async def test_the_proxy_passes_an_upstream_task_s_input_requests_on(tmp_path: Path) -> None:
    upstream = (
        *TOOLFOLD,
        "mcp",
        "--store",
        store_url(tmp_path),
        "--session",
        "up",
        *TOOLS,
        "--task-after",
        "3600",
    )
    params = proxy(tmp_path, *upstream, options=("--tasks", "upstream"))
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), task_session(r, w) as client:
            await client.discover()
            requests, text = await _confirm(client)
    assert list(requests) == ["confirm"]
    assert text.startswith("a.txt: deleted")


async def test_a_required_task_tool_is_refused_to_a_client_without_the_extension(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "gate"
    required = ("--tools", "task_tools:TOOLS", "--no-builtin", "--task-after", "gated=required")
    with anyio.fail_after(120):
        async with connect(tmp_path, *required) as plain:
            with pytest.raises(MCPError) as refused:
                await plain.call_tool("gated", {"gate": str(gate)})
        async with tasks_over_stdio(tmp_path, *required, session="s2") as client:
            # Not --task-after 0: required alone makes the call a task.
            handle = await call(client, "gated", {"gate": str(gate)})
            gate.touch()
            done = await until_status(client, handle.task_id, "completed")
    assert refused.value.error.code == -32021
    assert refused.value.error.data == {
        "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
    }
    assert await calls(tmp_path, "s1") == []  # refused before anything was recorded
    assert isinstance(handle, TaskHandle) and done.result is not None
