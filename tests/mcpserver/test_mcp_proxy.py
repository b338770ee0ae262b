"""``toolfold mcp proxy`` in front of real third-party MCP servers over stdio, driven by
the SDK client (the upstreams' fixtures are in ``conftest.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_helpers import calls, clean_env, proxy, session_on, text_of

from conftest import COMMITS


async def test_git_log_of_50k_commits_is_bounded_and_spilled_byte_exact(
    tmp_path: Path, git_server: Path, big_repo: Path
) -> None:
    args = {"repo_path": str(big_repo), "max_count": COMMITS}
    direct = StdioServerParameters(command=str(git_server), env=clean_env(), cwd=str(tmp_path))
    with anyio.fail_after(240):
        async with session_on(direct, tmp_path / "git.err") as client:
            raw = text_of(await client.call_tool("git_log", args))
        async with session_on(proxy(tmp_path, str(git_server)), tmp_path / "proxy.err") as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            result = await client.call_tool("git_log", args)
    assert len(raw.encode()) > 2_000_000  # megabytes from the upstream
    assert "git_log" in listed and "toolfold_read" in listed
    assert "spill file" in (listed["git_log"].description or "")
    text = text_of(result)
    assert not result.is_error
    assert len(text.encode()) < 60 * 1024
    assert text.startswith(raw[:1000])  # head window: the newest commits
    spill = Path(text.split("Full output: ")[1].split("]")[0])
    assert spill.read_bytes() == raw.encode()
    assert text.count("[Showing the") == 1  # the proxy's note, no standard cut notice too
    assert f'call toolfold_read with path="{spill}"' in text
    [call] = await calls(tmp_path, "p1")
    assert call.status == "ok" and call.tool_name == "git_log"


async def test_everything_progress_images_structured_content_and_big_text(
    tmp_path: Path, everything_server: Path
) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    big = "x" * 200_000
    with anyio.fail_after(120):
        async with session_on(
            proxy(tmp_path, str(everything_server), "stdio"), tmp_path / "proxy.err"
        ) as client:
            long = await client.call_tool(
                "trigger-long-running-operation",
                {"duration": 2, "steps": 10},
                progress_callback=on_progress,
            )
            image = await client.call_tool("get-tiny-image", {})
            structured = await client.call_tool("get-structured-content", {"location": "Chicago"})
            echo = await client.call_tool("echo", {"message": big})
    assert not long.is_error and progress and progress == sorted(set(progress))
    assert any(isinstance(b, types.ImageContent) for b in image.content)
    assert structured.structured_content and "temperature" in str(structured.structured_content)
    assert len(text_of(echo).encode()) < 60 * 1024
    spill = Path(text_of(echo).split("Full output: ")[1].split("]")[0])
    assert big in spill.read_text()
    stored = await calls(tmp_path, "p1")
    assert [c.status for c in stored] == ["ok"] * 4
    # toolfold's record of each call rides in _meta, for uncut results as for cut ones
    for result, call in zip((long, image, structured, echo), stored, strict=True):
        record = (result.meta or {})["toolfold"]
        assert record["call_id"] == call.tool_call_id and record["session"] == "p1"
        assert record["outcome"] == "ok"
    assert (structured.meta or {})["toolfold"]["spill_path"] is None
    assert (echo.meta or {})["toolfold"]["spill_path"] == str(spill)
    assert (echo.meta or {})["toolfold"]["truncation"]["truncated"] is True


async def test_cancel_settles_cancelled_and_the_proxy_keeps_serving(
    tmp_path: Path, everything_server: Path
) -> None:
    started = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    with anyio.fail_after(120):
        async with session_on(
            proxy(tmp_path, str(everything_server), "stdio"), tmp_path / "proxy.err"
        ) as client:
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await client.call_tool(
                        "trigger-long-running-operation",
                        {"duration": 60, "steps": 60},
                        progress_callback=on_progress,
                    )

                group.start_soon(call)
                await started.wait()
                group.cancel_scope.cancel()
            after = await client.call_tool("echo", {"message": "still here"})
            assert "still here" in text_of(after)
            for _ in range(600):
                found = [c for c in await calls(tmp_path, "p1") if c.tool_name != "echo"]
                if found and found[0].settled:
                    break
                await anyio.sleep(0.05)
    assert found[0].status == "cancelled"


async def test_an_upstream_crash_is_an_error_result_and_the_next_call_restarts_it(
    tmp_path: Path, everything_server: Path
) -> None:
    pids = tmp_path / "upstream.pids"
    wrapper = f"echo $$ >> {pids}; echo starting up >&2; exec {everything_server} stdio"
    started = [anyio.Event(), anyio.Event()]
    results: list[Any] = []

    async def call(n: int) -> None:
        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            started[n].set()

        results.append(
            await client.call_tool(
                "trigger-long-running-operation",
                {"duration": 60, "steps": 60},
                progress_callback=on_progress,
            )
        )

    try:
        with anyio.fail_after(120):
            async with session_on(
                proxy(tmp_path, "sh", "-c", wrapper), tmp_path / "proxy.err"
            ) as client:
                async with anyio.create_task_group() as group:
                    for n in range(2):  # two calls pending when the upstream dies
                        group.start_soon(call, n)
                    for event in started:
                        await event.wait()
                    os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
                again = await client.call_tool("echo", {"message": "restarted"})
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert len(results) == 2
    for crashed in results:
        assert crashed.is_error
        message = text_of(crashed)
        assert "upstream `sh -c" in message
        assert "was killed by signal 9 (SIGKILL) during the call" in message
        assert "its stderr ended with: starting up" in message
    assert "restarted" in text_of(again)
    assert len(pids.read_text().split()) == 2
    stored = await calls(tmp_path, "p1")
    assert sorted(c.status for c in stored) == ["error", "error", "ok"]


async def test_an_upstream_exit_status_and_stderr_reach_every_pending_call(
    tmp_path: Path,
) -> None:
    pids = tmp_path / "upstream.pids"
    server = Path(__file__).with_name("exiting_upstream.py")
    params = proxy(tmp_path, sys.executable, str(server))
    params = params.model_copy(update={"env": {**(params.env or {}), "UPSTREAM_PIDS": str(pids)}})
    marker = tmp_path / "waiting"
    results: dict[str, Any] = {}
    with anyio.fail_after(120):
        async with session_on(params, tmp_path / "proxy.err") as client:

            async def call(name: str, args: dict[str, Any]) -> None:
                results[name] = await client.call_tool(name, args)

            async with anyio.create_task_group() as group:
                group.start_soon(call, "wait", {"started": str(marker)})
                for _ in range(600):  # bounded: the upstream creates it when `wait` runs
                    if marker.exists():
                        break
                    await anyio.sleep(0.05)
                group.start_soon(call, "exit", {})
            again = await client.call_tool("echo", {"after": "the exit"})
    for name in ("wait", "exit"):
        message = text_of(results[name])
        assert results[name].is_error, message
        assert f"upstream `{sys.executable} {server}` exited with status 3" in message
        assert "its stderr ended with: fatal: the disk is on fire" in message
    assert not again.is_error and "the exit" in text_of(again)
    assert len(pids.read_text().split()) == 2  # restarted for the next call


async def test_an_upstream_that_exits_while_its_child_holds_its_stdout_fails_its_call(
    tmp_path: Path,
) -> None:
    # npx's case: the upstream dies, but a process it started keeps its stdout open, so
    # the pipe never reaches end of file. The pending call must still learn that the
    # upstream exited (not wait on the pipe for ever), and the next call restarts it.
    pids, holder = tmp_path / "upstream.pids", tmp_path / "holder.pid"
    server = Path(__file__).with_name("exiting_upstream.py")
    script = f"sleep 600 & echo $! >> {holder}; exec {sys.executable} {server}"
    params = proxy(tmp_path, "/bin/sh", "-c", script)
    params = params.model_copy(update={"env": {**(params.env or {}), "UPSTREAM_PIDS": str(pids)}})
    try:
        with anyio.fail_after(120):
            async with session_on(params, tmp_path / "proxy.err") as client:
                died = await client.call_tool("exit", {})
                again = await client.call_tool("echo", {"after": "the exit"})
        message = text_of(died)
        assert died.is_error, message
        assert "exited with status 3" in message, message
        assert "its stderr ended with: fatal: the disk is on fire" in message
        assert not again.is_error and "the exit" in text_of(again)
        assert len(pids.read_text().split()) == 2  # restarted for the next call
    finally:
        for pid in holder.read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)


async def test_an_upstream_message_over_the_cap_is_an_error_and_never_buffered(
    tmp_path: Path, git_server: Path, big_repo: Path
) -> None:
    params = proxy(tmp_path, str(git_server))
    params = params.model_copy(
        update={
            "args": [*params.args[:-2], "--max-message-bytes", "1000000", "--", str(git_server)]
        }
    )
    with anyio.fail_after(240):
        async with session_on(params, tmp_path / "proxy.err") as client:
            big = await client.call_tool(
                "git_log", {"repo_path": str(big_repo), "max_count": COMMITS}
            )
            small = await client.call_tool("git_log", {"repo_path": str(big_repo), "max_count": 2})
    assert big.is_error
    assert "more than 1,000,000 bytes" in text_of(big) and "--max-message-bytes" in text_of(big)
    assert not small.is_error and "commit number 49999" in text_of(small)


async def test_a_hung_upstream_call_is_an_error_and_the_upstream_restarts(
    tmp_path: Path, everything_server: Path
) -> None:
    pids = tmp_path / "upstream.pids"
    wrapper = f"echo $$ >> {pids}; exec {everything_server} stdio"
    params = proxy(tmp_path, "sh", "-c", wrapper)
    params = params.model_copy(
        update={"args": [*params.args[:-4], "--upstream-timeout", "2", *params.args[-4:]]}
    )
    try:
        with anyio.fail_after(120):
            async with session_on(params, tmp_path / "proxy.err") as client:
                hung = await client.call_tool(
                    "trigger-long-running-operation", {"duration": 60, "steps": 60}
                )
                again = await client.call_tool("echo", {"message": "fresh"})
    finally:
        for pid in pids.read_text().split() if pids.exists() else []:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
    assert hung.is_error and "did not answer within 2 s" in text_of(hung)
    assert "fresh" in text_of(again)
    assert len(pids.read_text().split()) == 2


async def test_with_builtin_adds_the_prefixed_toolfold_tools(
    tmp_path: Path, everything_server: Path
) -> None:
    params = proxy(tmp_path, str(everything_server), "stdio")
    params = params.model_copy(
        update={"args": [*params.args[:-3], "--with-builtin", *params.args[-3:]]}
    )
    with anyio.fail_after(120):
        async with session_on(params, tmp_path / "proxy.err") as client:
            listed = (await client.list_tools()).tools
            names = [t.name for t in listed]
            ran = await client.call_tool("toolfold_bash", {"command": "echo builtin"})
            echoed = await client.call_tool("echo", {"message": "upstream"})
    assert {"toolfold_bash", "toolfold_read", "toolfold_grep", "toolfold_pytest"} <= set(names)
    assert "echo" in names and not any(n in names for n in ("bash", "read"))
    # The built-in tools' commands are confined (the default), and their descriptions say so.
    [bash] = [t for t in listed if t.name == "toolfold_bash"]
    assert "runs in the workspace-write sandbox" in (bash.description or "")
    assert text_of(ran).startswith("builtin\n") and "upstream" in text_of(echoed)
    stored = await calls(tmp_path, "p1")
    assert [(c.tool_name, c.status) for c in stored] == [("toolfold_bash", "ok"), ("echo", "ok")]


async def test_sampling_requests_and_log_messages_pass_through(
    tmp_path: Path, everything_server: Path
) -> None:
    prompts: list[str] = []
    logs: list[Any] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        content = params.messages[0].content
        prompts.append(getattr(content, "text", ""))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled by the test client"),
            model="test-model",
        )

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    params = proxy(tmp_path, str(everything_server), "stdio")
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (r, w),
            ClientSession(r, w, sampling_callback=sampling, logging_callback=on_log) as client,
        ):
            await client.initialize()
            sampled = await client.call_tool("trigger-sampling-request", {"prompt": "hello"})
            await client.call_tool("toggle-simulated-logging", {})
            for _ in range(300):  # the upstream logs every 5 s
                if logs:
                    break
                await anyio.sleep(0.05)
            await client.call_tool("toggle-simulated-logging", {})
    assert not sampled.is_error and "sampled by the test client" in text_of(sampled)
    assert prompts and "hello" in prompts[0]
    assert logs, "no log message reached the client"


async def test_a_structured_content_bigger_than_the_window_moves_to_a_spill_file(
    tmp_path: Path,
) -> None:
    server = Path(__file__).with_name("structured_upstream.py")
    with anyio.fail_after(120):
        async with session_on(
            proxy(tmp_path, sys.executable, str(server)), tmp_path / "proxy.err"
        ) as client:
            result = await client.call_tool("table", {})
    note = (result.structured_content or {})["toolfold_note"]
    moved = Path(note.split(" was moved to ")[1].split(";")[0])
    assert json.loads(moved.read_text()) == {
        "rows": [{"row": i, "label": f"row number {i}"} for i in range(5000)]
    }
    assert text_of(result).startswith("5000 rows") and str(moved) in text_of(result)
    assert (result.meta or {})["upstream"] == "kept"  # the upstream's own _meta stays
    assert (result.meta or {})["toolfold"]["outcome"] == "ok"


async def test_elicitation_and_roots_requests_pass_through(
    tmp_path: Path, everything_server: Path
) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root(uri="file:///work/project-root", name="project-root")]
        )

    params = proxy(tmp_path, str(everything_server), "stdio")
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (r, w),
            ClientSession(r, w, elicitation_callback=elicit, list_roots_callback=roots) as client,
        ):
            await client.initialize()
            elicited = await client.call_tool("trigger-elicitation-request", {})
            listed = await client.call_tool("get-roots-list", {})
    assert asked and "Please provide inputs" in asked[0]
    assert "decline" in text_of(elicited).lower()
    assert "file:///work/project-root" in text_of(listed)


async def test_a_stopped_upstream_call_ends_at_once_and_the_connection_serves_on(
    tmp_path: Path,
) -> None:
    # `stop` (the client's cancel, in the proxy) ends a call the upstream has not
    # answered, without waiting for it; the same upstream answers the next call.
    from toolfold.mcp._upstream import Stopped, Upstream, UpstreamSpec

    script = Path(__file__).with_name("gated_upstream.py")
    upstream = Upstream(
        UpstreamSpec(command=(sys.executable, str(script))), tmp_path / "upstream.err"
    )
    gate = tmp_path / "gate"
    try:
        with anyio.fail_after(60):
            stop = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(0.3, stop.set_result, None)
            started = time.monotonic()
            with pytest.raises(Stopped):
                await upstream.call(lambda s: s.call_tool("wait", {"gate": str(gate)}), stop=stop)
            assert time.monotonic() - started < 10
            gate.touch()
            answer = await upstream.call(lambda s: s.call_tool("wait", {"gate": str(gate)}))
            assert text_of(answer) == "through the gate"
            assert upstream.starts == 1
    finally:
        await upstream.aclose()
