"""``toolfold mcp`` over stdio, driven by the official MCP SDK client in a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import (
    TOOLFOLD,
    calls,
    clean_env,
    connect,
    kill_group_in,
    lease_owners,
    pending_text,
    stdio_params,
    store_url,
    text_of,
)

TWO_MB = "seq 1 300000; head -c 1200000 /dev/zero | tr '\\0' x; echo"
"""About 2 MB of output: 300k numbered lines, then one long line."""

BACKGROUND = ["bash_read", "bash_write", "bash_signal", "bash_stop", "bash_list"]


async def test_lists_the_builtin_tools_with_schemas_and_window_note(tmp_path: Path) -> None:
    async with connect(tmp_path) as client:
        listed = (await client.list_tools()).tools
    by_name = {t.name: t for t in listed}
    assert list(by_name) == ["bash", "read", "grep", "pytest", *BACKGROUND]
    bash = by_name["bash"]
    assert bash.input_schema["required"] == ["command"]
    assert set(bash.input_schema["properties"]) == {"command", "timeout", "yield_after", "tty"}
    assert bash.input_schema["properties"]["yield_after"]["default"] == 10.0
    assert "window" in (bash.description or "") and "spill file" in (bash.description or "")
    assert bash.output_schema is not None and "truncation" in bash.output_schema["properties"]
    # The size hint Claude Code reads: the window (50 KiB) plus room for the footer.
    assert bash.meta == {"anthropic/maxResultSizeChars": 50 * 1024 + 8192}


async def test_two_megabytes_give_a_bounded_result_a_byte_exact_spill_and_progress(
    tmp_path: Path,
) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    expected = subprocess.run(["bash", "-c", TWO_MB], capture_output=True, check=True).stdout
    assert len(expected) > 2_000_000
    async with connect(tmp_path) as client:
        result = await client.call_tool("bash", {"command": TWO_MB}, progress_callback=on_progress)
        structured = result.structured_content
        assert structured is not None
        spill = Path(structured["spill_path"])
        # Page the spill file from the hint's offset with the server's own read tool.
        page = await client.call_tool("read", {"path": str(spill), "offset": 1, "limit": 3})
    text = text_of(result)
    assert not result.is_error
    assert len(text.encode()) < 60 * 1024  # the window (50 KB) plus footer and hint
    # Within the size hint the result carries, so a client shows it as it is.
    assert result.meta is not None
    assert len(text) <= result.meta["anthropic/maxResultSizeChars"] == 50 * 1024 + 8192
    assert f"Full output: {spill}" in text
    assert "cut]" not in text  # bash's footer stands in for the standard cut notice
    assert f'call read with path="{spill}" and offset=1' in text
    assert structured["truncation"]["total_bytes"] == len(expected)
    assert structured["truncation"]["truncated"] is True
    assert structured["details"] == {"exit_code": 0}
    assert spill.read_bytes() == expected
    assert oct(spill.stat().st_mode & 0o777) == oct(0o600)
    for directory in (spill.parent, spill.parent.parent):  # spill/<session>, spill/
        assert oct(directory.stat().st_mode & 0o777) == oct(0o700)
    assert text_of(page).startswith("1\n2\n3\n")
    assert progress, "no progress notification arrived"
    values = [v for v, _ in progress]
    assert values == sorted(set(values)), values  # strictly increasing
    assert all(m and "so far" in m and "\n" not in m for _, m in progress)
    assert values[-1] <= len(expected)


async def test_a_failing_command_is_an_error_result_with_its_output(tmp_path: Path) -> None:
    async with connect(tmp_path) as client:
        result = await client.call_tool("bash", {"command": "echo partial; exit 3"})
    assert result.is_error
    assert text_of(result).startswith("partial\n")
    assert "Command exited with code 3" in text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["details"] == {"exit_code": 3}
    assert result.structured_content["outcome"] == "error"
    [call] = await calls(tmp_path)
    assert call.status == "error" and call.summary == "echo partial; exit 3"
    shown = subprocess.run(
        [*TOOLFOLD, "show", "s1", "--store", store_url(tmp_path)],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and "echo partial; exit 3" in shown.stdout


async def test_invalid_arguments_name_the_field_and_unknown_tools_are_protocol_errors(
    tmp_path: Path,
) -> None:
    async with connect(tmp_path) as client:
        missing = await client.call_tool("bash", {"timeout": 5})
        wrong = await client.call_tool("bash", {"command": "true", "timeout": "soon"})
        with pytest.raises(MCPError, match="unknown tool 'nope'"):
            await client.call_tool("nope", {})
        still = await client.call_tool("bash", {"command": "echo alive"})
    assert missing.is_error and "- command: Field required" in text_of(missing)
    assert wrong.is_error and "- timeout:" in text_of(wrong)
    assert text_of(still) == "alive\n"


async def test_cancel_mid_call_keeps_partial_output_and_settles_cancelled(tmp_path: Path) -> None:
    started = anyio.Event()
    command = "for i in $(seq 1 100000); do echo tick $i; sleep 0.01; done"

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    async with connect(tmp_path) as client:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.call_tool("bash", {"command": command}, progress_callback=on_progress)

            group.start_soon(call)
            with anyio.fail_after(60):
                await started.wait()
            group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        # The server keeps answering on the same connection.
        after = await client.call_tool("bash", {"command": "echo next"})
        assert text_of(after) == "next\n"
        for _ in range(600):
            found = [c for c in await calls(tmp_path) if c.summary == command]
            if found and found[0].settled:
                break
            await asyncio.sleep(0.05)
    [cancelled] = found
    assert cancelled.status == "cancelled"
    message = cancelled.message or {}
    text = message["content"][0]["text"]
    assert text.startswith("tick 1\n") and "[Tool call cancelled" in text


async def test_four_concurrent_calls_are_independent(tmp_path: Path) -> None:
    # Each command waits (bounded) until all four have started, so they must overlap.
    def command(i: int, tail: str) -> str:
        return (
            f"touch started-{i}; n=0; while [ $(ls started-* | wc -l) -lt 4 ] && "
            f"[ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done; echo call {i}; {tail}"
        )

    async with connect(tmp_path) as client:
        results = await asyncio.gather(
            client.call_tool("bash", {"command": command(0, "true")}),
            client.call_tool("bash", {"command": command(1, "exit 3")}),
            client.call_tool("bash", {"command": command(2, "true")}),
            client.call_tool("bash", {"command": command(3, "true")}),
        )
    assert [r.is_error for r in results] == [False, True, False, False]
    assert [text_of(r).splitlines()[0] for r in results] == [f"call {i}" for i in range(4)]
    stored = await calls(tmp_path)
    assert sorted(c.status for c in stored) == ["error", "ok", "ok", "ok"]


def _rpc(proc: subprocess.Popen[bytes], line: bytes) -> dict[str, Any]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + b"\n")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    assert ready, f"no reply to {line!r} within 60 s"
    reply: dict[str, Any] = json.loads(proc.stdout.readline())
    return reply


def _initialize(proc: subprocess.Popen[bytes]) -> None:
    """The MCP handshake, by hand: initialize, then the initialized notification."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    assert "result" in _rpc(proc, json.dumps(init).encode())
    assert proc.stdin is not None
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')


def test_a_malformed_message_gets_an_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    # Malformed input cannot be sent through the SDK client, so this one test speaks
    # JSON-RPC lines itself.
    proc = subprocess.Popen(
        [*TOOLFOLD, "mcp", "--store", store_url(tmp_path)],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _initialize(proc)
        bad = _rpc(proc, b'{"jsonrpc": "2.0", "id": 2, "method": ')
        assert bad["error"]["code"] == -32700, bad
        listed = _rpc(proc, b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}')
        assert listed["id"] == 3 and len(listed["result"]["tools"]) == 4 + len(BACKGROUND)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


async def test_kill_9_mid_call_then_a_new_server_settles_it_interrupted(tmp_path: Path) -> None:
    started = anyio.Event()
    command = (
        "echo $PPID > server.pid; echo $$ > command.pid; "
        "for i in $(seq 1 100000); do echo tick $i; sleep 0.01; done"
    )

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        if value > 200:
            started.set()

    try:
        with anyio.fail_after(60), open(tmp_path / "client.err", "w") as errlog:
            from mcp.client.session import ClientSession
            from mcp.client.stdio import stdio_client

            try:
                async with (
                    # Unconfined: the command reports the server's pid ($PPID), which
                    # inside a sandbox would be a pid of the sandbox's own namespace.
                    stdio_client(stdio_params(tmp_path, "--sandbox", "off"), errlog=errlog) as (
                        r,
                        w,
                    ),
                    ClientSession(r, w) as client,
                ):
                    await client.initialize()
                    async with anyio.create_task_group() as group:

                        async def call() -> None:
                            await client.call_tool(
                                "bash", {"command": command}, progress_callback=on_progress
                            )

                        group.start_soon(call)
                        await started.wait()
                        # Wait (bounded) for a durable checkpoint holding output.
                        for _ in range(600):
                            if "tick 1\n" in await pending_text(tmp_path):
                                break
                            await asyncio.sleep(0.05)
                        os.kill(int((tmp_path / "server.pid").read_text()), signal.SIGKILL)
                        group.cancel_scope.cancel()
            except Exception:
                pass  # the transport breaks with the server: expected
        [before] = await calls(tmp_path)
        assert before.status == "unsettled"
        # The call was leased as the server process, so a janitor knows its host died.
        server_pid = int((tmp_path / "server.pid").read_text())
        assert await lease_owners(tmp_path) == [f"{socket.gethostname()}:{server_pid}"]
        async with connect(tmp_path) as client:
            await client.list_tools()
        [after] = await calls(tmp_path)
    finally:
        kill_group_in(tmp_path / "command.pid")
    assert after.status == "interrupted"
    text = (after.message or {})["content"][0]["text"]
    assert text.startswith("tick 1\n") and "[Tool call interrupted" in text


async def test_tools_option_adds_user_tools_and_no_builtin_leaves_them_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "mytools.py").write_text(
        "from pydantic import BaseModel\n"
        "from toolfold.harness import tool\n"
        "class P(BaseModel):\n"
        "    name: str\n"
        "@tool(params=P)\n"
        "async def hello(tool_call_id, params, cancel, out, context):\n"
        "    '''Say hello.'''\n"
        "    out.write(f'hello {params.name}')\n"
    )
    extra = {"PYTHONPATH": str(tmp_path)}
    async with connect(tmp_path, "--tools", "mytools:hello", "--no-builtin", env=extra) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("hello", {"name": "mcp"})
    assert listed == ["hello"]
    assert text_of(result) == "hello mcp"


def test_closing_stdin_mid_call_settles_the_call_cancelled(tmp_path: Path) -> None:
    # The client goes away without a cancel (stdin EOF): the call still settles,
    # as cancelled with its partial output, and the server exits by itself.
    proc = subprocess.Popen(
        [*TOOLFOLD, "mcp", "--store", store_url(tmp_path), "--session", "s1"],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    command = "echo $$ > command.pid; for i in $(seq 1 100000); do echo tick $i; sleep 0.01; done"
    try:
        _initialize(proc)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "bash",
                "arguments": {"command": command},
                "_meta": {"progressToken": 7},
            },
        }
        progress = _rpc(proc, json.dumps(call).encode())  # the first progress notification
        assert progress["method"] == "notifications/progress", progress
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        kill_group_in(tmp_path / "command.pid")
    [call_view] = asyncio.run(calls(tmp_path))
    assert call_view.status == "cancelled"
    assert (call_view.message or {})["content"][0]["text"].startswith("tick 1\n")
