"""``toolfold mcp`` serving the tasks extension (``io.modelcontextprotocol/tasks``) to the
official SDK client: a call answered with a task, polled with ``tasks/get`` while its
status grows, completed, failed, cancelled, kept across a ``kill -9`` of the server,
expired, and scoped to the context that made it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import mcp_types as types
import pytest
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_helpers import calls, connect, http_server, kill_group_in, proxy, store_url, text_of
from task_client import (
    EXT,
    TaskHandle,
    TaskState,
    call,
    cancel,
    get,
    task_session,
    tasks_over_http,
    tasks_over_stdio,
)

from toolfold.history import list_calls, pending_output
from toolfold.storage import open_repository

HERE = str(Path(__file__).parent)
TOOLS = ("--tools", "task_tools:TOOLS")
T = TypeVar("T")


async def until(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll ``probe`` until it returns something truthy (bounded)."""
    for _ in range(1200):
        found = await probe()
        if found:
            return found
        await anyio.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


async def until_status(client: Any, task_id: str, *statuses: str) -> TaskState:
    async def probe() -> TaskState | None:
        state = await get(client, task_id)
        return state if state.status in statuses else None

    return await until(probe, f"task {task_id} to reach {statuses}")


@pytest.fixture(autouse=True)
def _importable_tools(monkeypatch: pytest.MonkeyPatch) -> None:
    # The servers import task_tools (--tools) from this directory.
    monkeypatch.setenv("PYTHONPATH", HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))


async def test_a_call_becomes_a_task_whose_status_grows_until_it_completes(
    tmp_path: Path,
) -> None:
    gates = [tmp_path / f"gate{i}" for i in range(3)]
    command = "".join(
        f"echo step {i}; while [ ! -e {gate} ]; do sleep 0.02; done; "
        for i, gate in enumerate(gates)
    )
    messages: list[str] = []
    with anyio.fail_after(120):
        async with tasks_over_stdio(tmp_path, "--task-after", "0") as client:
            caps = (await client.discover()).capabilities
            handle = await call(client, "bash", {"command": command + "echo done"})
            assert isinstance(handle, TaskHandle)
            # Committed before the answer: the store already holds the call.
            assert [c.tool_call_id.startswith("mcp-") for c in await calls(tmp_path)] == [True]
            for i, gate in enumerate(gates):

                async def step(i: int = i) -> TaskState | None:
                    state = await get(client, handle.task_id)
                    ok = state.status == "working" and f"last: step {i}" in (
                        state.status_message or ""
                    )
                    return state if ok else None

                state = await until(step, f"step {i} in the status")
                messages.append(state.status_message or "")
                gate.touch()
            done = await until_status(client, handle.task_id, "completed")
    assert caps.extensions is not None and EXT in caps.extensions
    assert handle.status == "working" and handle.ttl_ms == 3_600_000
    assert handle.poll_interval_ms == 1000 and "~s1" in handle.task_id
    assert messages[0].startswith("1 line / 7 B so far")
    assert messages[1].startswith("2 lines / 14 B so far")
    assert messages[2].startswith("3 lines / 21 B so far")
    assert done.result is not None and done.result["isError"] is False
    assert done.result["content"][0]["text"] == "step 0\nstep 1\nstep 2\ndone\n"
    assert done.result["structuredContent"]["outcome"] == "ok"
    assert done.result_type == "complete"


async def test_a_failing_tool_is_completed_with_is_error_and_a_cancel_keeps_the_output(
    tmp_path: Path,
) -> None:
    gate = tmp_path / "never"
    with anyio.fail_after(120):
        async with tasks_over_stdio(tmp_path, "--task-after", "0") as client:
            failing = await call(client, "bash", {"command": "echo partial; exit 3"})
            failed = await until_status(client, failing.task_id, "completed", "failed")
            slow = await call(
                client,
                "bash",
                {"command": f"echo begun; while [ ! -e {gate} ]; do sleep 0.02; done"},
            )

            async def begun() -> TaskState | None:
                state = await get(client, slow.task_id)
                return state if "begun" in (state.status_message or "") else None

            await until(begun, "the command to start")
            ack = await cancel(client, slow.task_id)
            cancelled = await until_status(client, slow.task_id, "cancelled", "completed")
            again = await cancel(client, slow.task_id)
    assert failed.status == "completed"  # a tool that reported a problem is not "failed"
    assert failed.result is not None and failed.result["isError"] is True
    assert "Command exited with code 3" in failed.result["content"][0]["text"]
    assert ack.result_type == "complete"
    assert cancelled.status == "cancelled" and cancelled.result is None
    assert "partial output is kept" in (cancelled.status_message or "")
    assert again.result_type == "complete"  # cancelling an ended task is a no-op
    stored = {c.status for c in await calls(tmp_path)}
    assert stored == {"error", "cancelled"}


async def test_a_client_without_the_extension_gets_plain_results(tmp_path: Path) -> None:
    with anyio.fail_after(120):
        # A 2025-era session (initialize): plain results, whatever --task-after says.
        async with connect(tmp_path, "--task-after", "0") as legacy:
            plain = await legacy.call_tool("bash", {"command": "echo plain"})
        # A 2026-07-28 client that did not declare the extension: plain too, and the
        # tasks methods say which capability is missing.
        from mcp.client.session import ClientSession
        from mcp.client.stdio import stdio_client
        from mcp_helpers import stdio_params

        with open(tmp_path / "err", "w") as errlog:
            async with (
                stdio_client(stdio_params(tmp_path, "--task-after", "0"), errlog=errlog) as (r, w),
                ClientSession(r, w) as modern,
            ):
                await modern.discover()
                plain2 = await modern.call_tool("bash", {"command": "echo plain2"})
                with pytest.raises(MCPError) as missing:
                    await get(modern, "0" * 32 + "~s1")
    assert isinstance(plain, types.CallToolResult) and text_of(plain) == "plain\n"
    assert isinstance(plain2, types.CallToolResult) and text_of(plain2) == "plain2\n"
    assert missing.value.error.code == types.MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_quick_call_is_answered_at_once_and_a_task_is_seen_only_by_its_context(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(120):
        async with tasks_over_stdio(tmp_path, "--task-after", "60", session="mine") as client:
            quick = await call(client, "bash", {"command": "echo quick"})
        async with tasks_over_stdio(tmp_path, "--task-after", "0", session="mine") as client:
            mine = await call(client, "bash", {"command": "echo mine"})
            await until_status(client, mine.task_id, "completed")
        async with tasks_over_stdio(tmp_path, "--task-after", "0", session="other") as other:
            with pytest.raises(MCPError) as foreign:
                await get(other, mine.task_id)
            with pytest.raises(MCPError) as unknown:
                await get(other, "f" * 32 + "~mine")
            with pytest.raises(MCPError) as garbage:
                await cancel(other, "../../etc/passwd")
        # The context that made it still sees it (a new server on the same session).
        async with tasks_over_stdio(tmp_path, session="mine") as client:
            again = await get(client, mine.task_id)
    assert isinstance(quick, types.CallToolResult) and text_of(quick) == "quick\n"
    errors = {(e.value.error.code, e.value.error.message) for e in (foreign, unknown, garbage)}
    assert errors == {(types.INVALID_PARAMS, "Failed to retrieve task: Task not found")}
    assert again.status == "completed"


async def test_an_ended_task_past_its_ttl_goes_with_its_spill_file(tmp_path: Path) -> None:
    big = "seq 1 300000"  # ~2 MB: cut, with the full output in a spill file
    with anyio.fail_after(120):
        async with tasks_over_stdio(tmp_path, "--task-after", "0", "--task-ttl", "0.5") as client:
            handle = await call(client, "bash", {"command": big})
            done = await until_status(client, handle.task_id, "completed")
            spill = Path(done.result["structuredContent"]["spill_path"])  # type: ignore[index]
            assert spill.exists()

            async def gone() -> MCPError | None:
                try:
                    await get(client, handle.task_id)
                except MCPError as exc:
                    return exc
                return None

            error = await until(gone, "the task to expire")
    assert error.error.message == "Failed to retrieve task: Task not found"
    assert not spill.exists()
    assert [c.status for c in await calls(tmp_path)] == ["ok"]  # the call's record stays


async def pending_texts(tmp_path: Path, session: str) -> list[str]:
    """The checkpointed text of every unsettled call of ``session``."""
    repo = open_repository(store_url(tmp_path))
    try:
        s = await repo.open_session(session, read_only=True)
        found = []
        for view in await list_calls(s):
            state = None if view.settled else await pending_output(s, view)
            if isinstance(state, dict):
                found.append(str(state["content"][0]["text"]))
        return found
    finally:
        await repo.close()


def _kill(proc: Any) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


async def test_after_kill_9_a_new_server_answers_the_old_tasks(tmp_path: Path) -> None:
    # Two tasks in a server that is then killed: a bash command (not replay-safe) is
    # settled as interrupted with the output it had; the replay-safe `gated` tool is
    # run again and completes. The new server records into a new session.
    gate = tmp_path / "gate"
    command = "echo $$ > command.pid; echo tick 1; while true; do sleep 0.05; done"
    try:
        with anyio.fail_after(180):
            # Unconfined: the command reports its pid ($$) for the cleanup, which inside
            # a sandbox would be a pid of the sandbox's own namespace.
            old_server = (*TOOLS, "--sandbox", "off", "--task-after", "0")
            with http_server(tmp_path, *old_server, session="old") as (url, proc):
                async with tasks_over_http(url) as client:
                    interrupted = await call(client, "bash", {"command": command})
                    resumed = await call(client, "gated", {"gate": str(gate)})

                    async def checkpointed() -> bool:
                        texts = await pending_texts(tmp_path, "old")
                        return any("tick 1" in t for t in texts) and any(
                            "waiting" in t for t in texts
                        )

                    await until(checkpointed, "a durable checkpoint with output")
                    _kill(proc)
            gate.touch()
            with http_server(tmp_path, *TOOLS, "--sandbox", "off", session="new") as (url, _):
                async with tasks_over_http(url) as client:
                    first = await until_status(client, interrupted.task_id, "completed")
                    second = await until_status(client, resumed.task_id, "completed")
    finally:
        kill_group_in(tmp_path / "command.pid")
    assert first.result is not None and first.result["isError"] is True
    assert first.result["structuredContent"]["outcome"] == "interrupted"
    assert first.result["content"][0]["text"].startswith("tick 1\n")
    assert second.result is not None and second.result["isError"] is False
    assert "through the gate" in second.result["content"][0]["text"]
    assert {c.status for c in await calls(tmp_path, "old")} == {"interrupted", "ok"}


async def test_a_server_restarted_on_the_same_session_answers_while_it_reruns_a_task(
    tmp_path: Path,
) -> None:
    # The replay-safe `gated` task of a killed server is run again by the server that
    # starts on the same session; that re-run waits on the gate, so the new server must
    # answer tasks/get (`working`) while it runs, not only once it ends. It used to
    # re-run the task before listening: tasks/get waited as long as the task took.
    gate = tmp_path / "gate"
    server = (*TOOLS, "--sandbox", "off", "--task-after", "0")
    with anyio.fail_after(180):
        with http_server(tmp_path, *server, session="s1") as (url, proc):
            async with tasks_over_http(url) as client:
                handle = await call(client, "gated", {"gate": str(gate)})

                async def checkpointed() -> bool:
                    return any("waiting" in t for t in await pending_texts(tmp_path, "s1"))

                await until(checkpointed, "a durable checkpoint of the task")
                _kill(proc)
        with http_server(tmp_path, *server, session="s1") as (url, _):
            async with tasks_over_http(url) as client:
                working = await get(client, handle.task_id)
                assert working.status == "working", working  # the re-run waits on the gate
                gate.touch()
                done = await until_status(client, handle.task_id, "completed")
    assert done.result is not None and done.result["isError"] is False
    assert "through the gate" in done.result["content"][0]["text"]
    assert [c.status for c in await calls(tmp_path, "s1")] == ["ok"]


async def test_tasks_cancel_reaches_a_task_rerun_for_a_killed_server(tmp_path: Path) -> None:
    # The same re-run, cancelled instead of let through: tasks/cancel reaches a call
    # that the new server re-runs, not only the calls it started itself.
    gate = tmp_path / "gate"
    server = (*TOOLS, "--sandbox", "off", "--task-after", "0")
    with anyio.fail_after(180):
        with http_server(tmp_path, *server, session="s1") as (url, proc):
            async with tasks_over_http(url) as client:
                handle = await call(client, "gated", {"gate": str(gate)})

                async def checkpointed() -> bool:
                    return any("waiting" in t for t in await pending_texts(tmp_path, "s1"))

                await until(checkpointed, "a durable checkpoint of the task")
                _kill(proc)
        with http_server(tmp_path, *server, session="s1") as (url, _):
            async with tasks_over_http(url) as client:
                await until_status(client, handle.task_id, "working")
                await cancel(client, handle.task_id)
                ended = await until_status(client, handle.task_id, "cancelled", "completed")
    assert ended.status == "cancelled", ended
    assert not gate.exists()
    assert [c.status for c in await calls(tmp_path, "s1")] == ["cancelled"]


async def test_a_task_finished_for_a_killed_server_runs_in_the_new_servers_sandbox(
    tmp_path: Path,
) -> None:
    # A replay-safe task of a killed server, finished by a server on another session
    # (its first tasks/get re-runs it), runs its command confined like that server's
    # own: its write outside the workspace lands in the sandbox's private /tmp, not on
    # the host. It used to be re-run in an unconfined exec env.
    gate, target = tmp_path / "gate", tmp_path.parent / f"{tmp_path.name}-outside"
    confined = (*TOOLS, "--sandbox", "workspace-write", "--task-after", "0")
    with anyio.fail_after(180):
        with http_server(tmp_path, *confined, session="old") as (url, proc):
            async with tasks_over_http(url) as client:
                handle = await call(
                    client, "gated_touch", {"gate": str(gate), "target": str(target)}
                )

                async def checkpointed() -> bool:
                    return any("waiting" in t for t in await pending_texts(tmp_path, "old"))

                await until(checkpointed, "a durable checkpoint of the task")
                _kill(proc)
        gate.touch()
        with http_server(tmp_path, *confined, session="new") as (url, _):
            async with tasks_over_http(url) as client:
                done = await until_status(client, handle.task_id, "completed")
    assert done.result is not None and done.result["isError"] is False
    assert "touched 0" in done.result["content"][0]["text"]  # it ran, inside
    assert not target.exists()


async def test_the_proxy_offers_tasks_for_an_upstream_that_has_none(tmp_path: Path) -> None:
    # The upstream's call outlasts the proxy's default task delay (1 s): the proxy
    # answers with its own durable task, and the upstream's result completes it.
    gate = tmp_path / "gate"
    upstream = str(Path(__file__).with_name("gated_upstream.py"))
    params = proxy(tmp_path, sys.executable, upstream)
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (r, w),
            task_session(r, w) as client,
        ):
            caps = (await client.discover()).capabilities
            handle = await call(client, "wait", {"gate": str(gate)})
            working = await get(client, handle.task_id)
            gate.touch()
            done = await until_status(client, handle.task_id, "completed")
    assert caps.extensions is not None and EXT in caps.extensions
    assert isinstance(handle, TaskHandle) and working.status == "working"
    assert done.result is not None and done.result["isError"] is False
    assert done.result["content"][0]["text"].startswith("through the gate")
    assert done.result["_meta"]["toolfold"]["outcome"] == "ok"
    assert [c.status for c in await calls(tmp_path, "p1")] == ["ok"]
