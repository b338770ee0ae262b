"""``toolfold mcp proxy`` as real clients see it: capabilities, notifications, block
order, schemas, logging and completion, errors, the store, and a quiet exit."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import proxy, session_on, store_url, text_of

from toolfold.history import list_calls
from toolfold.storage import open_repository

HOSTILE = Path(__file__).with_name("hostile_upstream.py")


def _everything(tmp_path: Path, server: Path) -> Any:
    return proxy(tmp_path, str(server), "stdio")


async def test_the_upstream_sees_only_the_capabilities_the_client_has(
    tmp_path: Path, everything_server: Path
) -> None:
    with anyio.fail_after(120):
        async with session_on(_everything(tmp_path, everything_server), tmp_path / "e") as client:
            names = {t.name for t in (await client.list_tools()).tools}
    assert "echo" in names
    # server-everything offers these only to a client with sampling, elicitation, roots
    for needs in ("trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"):
        assert needs not in names


async def test_a_tool_list_change_is_announced_once(
    tmp_path: Path, everything_server: Path
) -> None:
    changes: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changes.append(message)

    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        text = types.TextContent(type="text", text="ok")
        return types.CreateMessageResult(role="assistant", content=text, model="m")

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    callbacks = {"message_handler": on_message, "sampling_callback": sampling}
    with anyio.fail_after(120):
        async with session_on(
            _everything(tmp_path, everything_server),
            tmp_path / "e",
            list_roots_callback=roots,
            **callbacks,
        ) as client:
            await client.list_tools()  # the upstream starts, and registers more tools
            for _ in range(3):
                await client.call_tool("echo", {"message": "after the start"})
            names = {t.name for t in (await client.list_tools()).tools}
    # server-everything sends one list change per tool it adds for these capabilities
    assert "trigger-sampling-request" in names and "get-roots-list" in names
    assert len(changes) <= 1


async def test_block_order_is_the_upstreams(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with session_on(proxy(tmp_path, sys.executable, str(HOSTILE)), tmp_path / "e") as c:
            result = await c.call_tool("blocks", {})
    kinds = [b.type for b in result.content]
    assert kinds == ["text", "image", "text"]
    assert text_of(result) == "The image below is a red dot."
    last = result.content[2]
    assert isinstance(last, types.TextContent) and last.text == "The image above is a red dot."


async def test_a_cut_across_blocks_keeps_each_in_place_with_the_footer_last(
    tmp_path: Path,
) -> None:
    params = proxy(tmp_path, sys.executable, str(HOSTILE), options=("--max-lines", "1"))
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "e") as client:
            result = await client.call_tool("blocks", {})
    # One line of window: the first text block; the second is cut, the image stays.
    kinds = [b.type for b in result.content]
    assert kinds == ["text", "image"]
    first = text_of(result)
    assert first.startswith("The image below is a red dot.\n[Showing the first 1 of 2 lines")


async def test_toolfold_schemas_are_portable(tmp_path: Path) -> None:
    def types_in(schema: Any) -> list[Any]:
        if isinstance(schema, dict):
            found = [schema["type"]] if "type" in schema else []
            return found + [t for v in schema.values() for t in types_in(v)]
        if isinstance(schema, list):
            return [t for v in schema for t in types_in(v)]
        return []

    with anyio.fail_after(60):
        async with session_on(proxy(tmp_path, sys.executable, str(HOSTILE)), tmp_path / "e") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
    schema = tools["toolfold_read"].output_schema
    assert schema and types_in(schema)
    assert all(isinstance(t, str) for t in types_in(schema)), types_in(schema)


async def test_logging_and_completion_reach_an_upstream_that_offers_them(
    tmp_path: Path,
) -> None:
    logs: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(str(params.data))

    params = proxy(tmp_path, sys.executable, str(HOSTILE))
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "e", logging_callback=on_log) as client:
            result = client.initialize_result
            await client.set_logging_level("debug")
            done = await client.complete(
                types.PromptReference(type="ref/prompt", name="greet"),
                {"name": "name", "value": "ada"},
            )
            await client.call_tool("echo", {"text": "sync"})
    assert result is not None and result.capabilities.logging is not None
    assert result.capabilities.completions is not None
    assert "level set to debug" in logs
    assert done.completion.values == ["ada-done"]


async def test_an_unknown_tool_error_names_the_upstreams_tools(tmp_path: Path) -> None:
    params = proxy(tmp_path, sys.executable, str(HOSTILE))
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "e") as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool("no_such_tool", {})
    message = raised.value.message
    assert "unknown tool 'no_such_tool'" in message
    assert "bad_utf8" in message and "echo" in message and "toolfold_read" in message


async def test_a_session_without_calls_leaves_nothing_in_the_store(tmp_path: Path) -> None:
    params = proxy(tmp_path, sys.executable, str(HOSTILE), session="bare")
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "e") as client:
            await client.list_tools()
        async with session_on(proxy(tmp_path, sys.executable, str(HOSTILE)), tmp_path / "e") as c:
            await c.call_tool("echo", {"text": "kept"})
    repo = open_repository(store_url(tmp_path))
    try:
        sessions = await repo.list_sessions()
    finally:
        await repo.close()
    assert "bare" not in sessions and "p1" in sessions


async def test_a_running_commands_hint_names_the_tools_as_the_client_sees_them(
    tmp_path: Path,
) -> None:
    # --with-builtin serves bash as toolfold_bash: its "still running" hint must name
    # toolfold_bash_read, which the client has, not bash_read, which it does not.
    params = proxy(tmp_path, sys.executable, str(HOSTILE), options=("--with-builtin",))
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "e") as client:
            started = await client.call_tool(
                "toolfold_bash", {"command": "cat", "yield_after": 0.01}
            )
            hint = text_of(started)
            found = re.search(r'(\w+) (\{"handle": "[^"]+"\}) shows its new output', hint)
            assert found is not None, hint
            assert found.group(1) == "toolfold_bash_read"
            assert "toolfold_bash_write sends it input" in hint
            assert "toolfold_bash_stop ends it" in hint
            # The tool the hint names is one the client can call, with those arguments.
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert {"toolfold_bash_read", "toolfold_bash_write", "toolfold_bash_stop"} <= set(tools)
            # So do the descriptions and schemas the model reads before any call.
            bash = tools["toolfold_bash"]
            said = f"{bash.description} {json.dumps(bash.input_schema)}"
            assert "toolfold_bash_read" in said
            assert re.search(r"(?<![\w-])bash_(read|write|signal|stop)", said) is None, said
            read = await client.call_tool(found.group(1), json.loads(found.group(2)))
            assert not read.is_error, text_of(read)
            stopped = await client.call_tool("toolfold_bash_stop", json.loads(found.group(2)))
            assert not stopped.is_error, text_of(stopped)


async def test_a_tool_list_then_kill_9_leaves_no_session(tmp_path: Path) -> None:
    # The session is created by the first call, not at connect: a proxy killed before
    # it could clean up leaves nothing for a client that only listed tools.
    pidfile = tmp_path / "proxy.pid"
    params = proxy(tmp_path, sys.executable, str(HOSTILE), session="killed")
    exec_as_self = (
        "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
        "os.execv(sys.argv[2], sys.argv[2:])"
    )
    params.args = ["-c", exec_as_self, str(pidfile), params.command, *params.args]
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "e") as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "echo" in names
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
            with pytest.raises(Exception):  # noqa: B017 - whatever the SDK makes of a dead server
                await client.list_tools()
    repo = open_repository(store_url(tmp_path))
    try:
        assert "killed" not in await repo.list_sessions()
    finally:
        await repo.close()
    # The same session name is created by a first call, and the call is in it.
    with anyio.fail_after(60):
        async with session_on(
            proxy(tmp_path, sys.executable, str(HOSTILE), session="killed"), tmp_path / "e"
        ) as c:
            await c.call_tool("echo", {"text": "now"})
    repo = open_repository(store_url(tmp_path))
    try:
        assert "killed" in await repo.list_sessions()
        calls = await list_calls(await repo.open_session("killed"))
        assert [c.tool_name for c in calls] == ["echo"]
    finally:
        await repo.close()


async def test_no_event_loop_noise_when_the_upstream_leaves_its_stdout_open(
    tmp_path: Path,
) -> None:
    # What npx does: the upstream process exits when its stdin closes, but a process it
    # started still holds its stdout. asyncio closes a subprocess transport only once the
    # process exited and every pipe reached end of file, so unless the proxy closes it,
    # the garbage collector does, after the loop closed: "Event loop is closed".
    holder = tmp_path / "holder.pid"
    script = f"sleep 600 & echo $! > {holder}; exec {sys.executable} {HOSTILE}"
    errlog = tmp_path / "proxy.err"
    try:
        with anyio.fail_after(60):
            async with session_on(proxy(tmp_path, "/bin/sh", "-c", script), errlog) as client:
                await client.call_tool("echo", {"text": "bye"})
        said = errlog.read_text()
        for noise in ("Event loop is closed", "Traceback", "Exception ignored"):
            assert noise not in said, said
        assert said.startswith("toolfold: MCP proxy for upstream")
    finally:
        os.kill(int(holder.read_text()), signal.SIGKILL)


async def test_no_event_loop_noise_on_exit(tmp_path: Path, everything_server: Path) -> None:
    errlog = tmp_path / "proxy.err"
    with anyio.fail_after(120):
        async with session_on(_everything(tmp_path, everything_server), errlog) as client:
            await client.call_tool("echo", {"message": "bye"})
    said = errlog.read_text()
    for noise in ("Event loop is closed", "Traceback", "Warning"):
        assert noise not in said, said


async def test_a_tool_list_makes_no_spill_directory_and_no_stderr_log(tmp_path: Path) -> None:
    # Both are made on first use: the session's spill directory when a call spills,
    # the upstream's stderr log when the upstream writes to its stderr. A client that
    # only lists the tools (of an upstream that writes nothing there) leaves neither.
    params = proxy(tmp_path, sys.executable, str(HOSTILE), session="bare")
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "e") as client:
            assert (await client.list_tools()).tools
    spill = tmp_path / "store" / "spill"
    assert not (spill / "bare").exists()
    assert not (spill / "bare.upstream-stderr.log").exists()
