"""``toolfold mcp proxy --tasks upstream``: an upstream's own tasks passed through the
proxy with bounded results. The upstream is ``toolfold mcp`` itself (it serves the
tasks extension), the client the official SDK client declaring the extension."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client
from mcp_helpers import HTTP_TOKEN, TOOLFOLD, calls, http_server, proxy, store_url, text_of
from task_client import TaskHandle, call, cancel, get, task_session, update
from test_mcp_tasks import until, until_status

HERE = str(Path(__file__).parent)


@pytest.fixture(autouse=True)
def _importable_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    # The upstream imports task_tools (--tools) from this directory.
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))


def upstream(tmp_path: Path, *args: str) -> tuple[str, ...]:
    """``toolfold mcp`` serving ``task_tools`` in session ``up``: every call a task."""
    return (
        *TOOLFOLD,
        "mcp",
        "--store",
        store_url(tmp_path),
        "--session",
        "up",
        "--no-builtin",
        "--tools",
        "task_tools:TOOLS",
        *args,
    )


async def test_an_upstream_task_passes_through_with_a_bounded_result(tmp_path: Path) -> None:
    gate, held = tmp_path / "gate", tmp_path / "held"
    params = proxy(
        tmp_path,
        *upstream(tmp_path, "--task-after", "0"),
        options=("--tasks", "upstream", "--max-lines", "5", "--task-poll", "0.2"),
    )
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), task_session(r, w) as client:
            await client.discover()
            handle = await call(client, "gated", {"gate": str(gate), "lines": 100})
            working = await get(client, handle.task_id)
            gate.touch()
            done = await until_status(client, handle.task_id, "completed")
            again = await get(client, handle.task_id)
            # A cancel goes to the upstream's task: the upstream's call is cancelled.
            second = await call(client, "gated", {"gate": str(held)})
            acked = await cancel(client, second.task_id)
            cancelled = await until_status(client, second.task_id, "cancelled")
    assert isinstance(handle, TaskHandle) and handle.task_id.endswith("~p1")
    assert handle.poll_interval_ms == 200
    # The status is the upstream's: its live window, which the proxy does not have.
    assert working.status == "working"
    assert working.status_message is not None and "waiting for the gate" in working.status_message
    assert done.result is not None and done.result["isError"] is False
    text = done.result["content"][0]["text"]
    # The upstream's own window holds all 102 lines; the proxy's is 5.
    assert text.startswith("waiting for the gate\nthrough the gate\nline 1\nline 2\nline 3\n")
    assert "line 4\n" not in text and "toolfold_read" in text
    record = done.result["_meta"]["toolfold"]
    assert record["truncation"]["total_lines"] >= 102 and record["truncation"]["output_lines"] == 5
    assert Path(record["spill_path"]).read_text().endswith("line 100\n")
    assert again.status == "completed" and again.result == done.result
    assert acked.result_type == "complete" and cancelled.status == "cancelled"
    assert [c.status for c in await calls(tmp_path, "p1")] == ["ok", "cancelled"]
    assert [c.status for c in await calls(tmp_path, "up")] == ["ok", "cancelled"]


async def test_a_client_without_tasks_gets_the_upstream_task_s_result_in_full(
    tmp_path: Path,
) -> None:
    # The proxy still asks the upstream for tasks, follows its task, and answers the
    # plain client with the bounded result once it ended.
    gate = tmp_path / "gate"
    gate.touch()
    params = proxy(
        tmp_path, *upstream(tmp_path, "--task-after", "0"), options=("--tasks", "upstream")
    )
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (r, w),
            ClientSession(r, w) as client,
        ):
            await client.initialize()
            result = await client.call_tool("gated", {"gate": str(gate), "lines": 3})
    assert result.is_error is False
    assert text_of(result).startswith("waiting for the gate\nthrough the gate\nline 1\n")
    assert [c.status for c in await calls(tmp_path, "up")] == ["ok"]


async def test_own_tasks_for_an_upstream_without_the_extension(tmp_path: Path) -> None:
    # --tasks upstream in front of a 2025-era upstream with no tasks: the proxy's own
    # task, after its --task-after delay.
    gate = tmp_path / "gate"
    gated = str(Path(__file__).with_name("gated_upstream.py"))
    params = proxy(
        tmp_path, sys.executable, gated, options=("--tasks", "upstream", "--task-after", "0")
    )
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), task_session(r, w) as client:
            await client.discover()
            handle = await call(client, "wait", {"gate": str(gate)})
            working = await get(client, handle.task_id)
            gate.touch()
            done = await until_status(client, handle.task_id, "completed")
    assert isinstance(handle, TaskHandle) and working.status == "working"
    assert done.result is not None and done.result["content"][0]["text"].startswith("through")


async def test_input_requests_bigger_than_the_window_fail_the_task(tmp_path: Path) -> None:
    # An upstream task asks for input in 20 KB of requests; the proxy's window is 2 KB:
    # the client is never handed them, the upstream's task is cancelled, and the
    # proxy's task ends with an error result saying why. A small one passes.
    params = proxy(
        tmp_path,
        *upstream(tmp_path, "--task-after", "0"),
        options=("--tasks", "upstream", "--max-bytes", "2K"),
    )

    async def upstream_cancelled() -> bool:
        return "cancelled" in [c.status for c in await calls(tmp_path, "up")]

    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (r, w), task_session(r, w) as client:
            await client.discover()
            big = await call(client, "ask_big", {"size": 20_000})
            failed = await until_status(client, big.task_id, "completed")
            # The upstream's task was cancelled: its call stopped waiting, settled so.
            await until(upstream_cancelled, "the upstream's call to settle as cancelled")
            small = await call(client, "ask_big", {"size": 10})
            asking = await until_status(client, small.task_id, "input_required")
    assert failed.input_requests is None and failed.result is not None
    assert failed.result["isError"] is True
    text = failed.result["content"][0]["text"]
    assert "asked for input in" in text and "over the proxy's window of 2,048 bytes" in text
    assert asking.input_requests is not None and list(asking.input_requests) == ["q"]


async def test_an_http_upstream_s_task_passes_through(tmp_path: Path) -> None:
    # Over Streamable HTTP the upstream checks that the Mcp-Name header of tasks/get,
    # tasks/update and tasks/cancel is the task id: the proxy's requests carry it.
    gate = tmp_path / "gate"
    tools = ("--tools", "task_tools:TOOLS", "--no-builtin", "--task-after", "0")
    with http_server(tmp_path, *tools, "--sandbox", "off", session="up") as (url, _):
        params = proxy(
            tmp_path,
            options=(
                "--tasks",
                "upstream",
                "--upstream-url",
                url,
                "--upstream-header",
                f"Authorization: Bearer {HTTP_TOKEN}",
            ),
        )
        with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (r, w),
                task_session(r, w) as client,
            ):
                await client.discover()
                handle = await call(client, "gated", {"gate": str(gate), "lines": 2})
                working = await get(client, handle.task_id)
                gate.touch()
                done = await until_status(client, handle.task_id, "completed")
                asking = await call(client, "ask_big", {"size": 10})
                await until_status(client, asking.task_id, "input_required")
                await update(client, asking.task_id, {"q": {"action": "accept"}})
                answered = await until_status(client, asking.task_id, "completed")
    assert working.status_message is not None and "waiting for the gate" in working.status_message
    assert done.result is not None and "line 2" in done.result["content"][0]["text"]
    assert answered.result is not None
    assert "answered: {'action': 'accept'}" in answered.result["content"][0]["text"]
    assert [c.status for c in await calls(tmp_path, "up")] == ["ok", "ok"]


def _gone(pid: int) -> bool:
    """The process ``pid`` no longer runs (a zombie waiting for its reaper counts)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


async def test_a_proxy_restarted_on_the_same_session_settles_an_upstream_task_interrupted(
    tmp_path: Path,
) -> None:
    # The upstream's task waits on a gate that never opens; the proxy following it is
    # killed with SIGKILL. Its upstream (a child on stdio) goes with it, and a proxy
    # started on the same session answers the old task id: settled as interrupted,
    # the upstream's call not run again and its task not followed again.
    gate, up_pids, proxy_pid = tmp_path / "gate", tmp_path / "upstream.pids", tmp_path / "proxy.pid"
    wrapped = ("sh", "-c", f'echo $$ >> {up_pids}; exec "$@"', "sh", *upstream(tmp_path))
    options = ("--tasks", "upstream", "--task-poll", "0.2")
    first = proxy(tmp_path, *wrapped, options=options)
    exec_as_self = (
        "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
        "os.execv(sys.argv[2], sys.argv[2:])"
    )
    first.args = ["-c", exec_as_self, str(proxy_pid), first.command, *first.args]
    try:
        with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
            async with stdio_client(first, errlog=errlog) as (r, w), task_session(r, w) as client:
                await client.discover()
                handle = await call(client, "gated", {"gate": str(gate)})
                working = await until_status(client, handle.task_id, "working")
                # The upstream's task is running: its status message is the tool's.
                assert working.status_message is not None
                assert "waiting for the gate" in working.status_message, working
                os.kill(int(proxy_pid.read_text()), signal.SIGKILL)
            old_upstream = int(up_pids.read_text().split()[0])

            async def upstream_gone() -> bool:
                return _gone(old_upstream)

            await until(upstream_gone, f"the killed proxy's upstream ({old_upstream}) to end")
            second = proxy(tmp_path, *wrapped, options=options)
            async with stdio_client(second, errlog=errlog) as (r, w), task_session(r, w) as client:
                await client.discover()
                settled = await until_status(client, handle.task_id, "completed", "failed")
                again = await get(client, handle.task_id)
    finally:
        for pid in up_pids.read_text().split() if up_pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert settled.status == "completed", settled
    assert settled.result is not None and settled.result["isError"] is True
    assert settled.result["_meta"]["toolfold"]["outcome"] == "interrupted"
    assert "interrupted before it finished" in settled.result["content"][0]["text"]
    # Shaped as a proxied result: toolfold's record in _meta, no structuredContent of
    # its own where the upstream's would be.
    assert "structuredContent" not in settled.result
    assert again.status == "completed" and again.result == settled.result
    # The upstream's call was not run again: only the killed proxy's upstream started.
    assert len(up_pids.read_text().split()) == 1
    assert [c.status for c in await calls(tmp_path, "p1")] == ["interrupted"]
