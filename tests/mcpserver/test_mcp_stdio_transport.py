"""The server's stdio transport (``toolfold.mcp._stdio``): bounded lines, backpressure on
stdout, a bad line answered and the connection served on."""

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
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from mcp_helpers import TOOLFOLD, clean_env, store_url

from toolfold.mcp._stdio import MAX_LINE_BYTES, WRITE_HIGH_WATER, LineReader, LineWriter


def _request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


async def _pipes(cap: int) -> tuple[LineReader, LineWriter, int, int]:
    """A reader of one pipe and a writer to another: the test's ends returned."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    writer = LineWriter(out_w)
    reader = LineReader(in_r, writer, cap)
    await writer.start()
    await reader.start()
    return reader, writer, in_w, out_r


def _read_lines(fd: int) -> list[dict[str, Any]]:
    data = b""
    while select.select([fd], [], [], 0.2)[0]:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        data += chunk
    return [json.loads(line) for line in data.splitlines()]


async def test_a_line_over_the_cap_is_answered_with_its_id_and_the_next_is_read() -> None:
    reader, writer, in_w, out_r = await _pipes(cap=4096)
    try:
        big = {"command": "x" * 100_000}
        line = _request(7, "tools/call", {"name": "bash", "arguments": big})
        after = _request(8, "tools/list")

        def feed() -> None:
            with os.fdopen(in_w, "wb") as pipe:
                pipe.write(line + b"not json\n" + after)

        sent = asyncio.get_running_loop().run_in_executor(None, feed)
        message = await reader.receive()  # the errors are answered first, in order
        await sent
        assert isinstance(message.message, types.JSONRPCRequest)
        assert (message.message.id, message.message.method) == (8, "tools/list")
        with pytest.raises(anyio.EndOfStream):
            await reader.receive()
        too_long, not_json = _read_lines(out_r)
        assert too_long["id"] == 7 and too_long["error"]["code"] == types.INVALID_REQUEST
        assert "more than 4,096 bytes (100,109 read)" in too_long["error"]["message"]
        assert not_json["id"] is None and not_json["error"]["code"] == types.PARSE_ERROR
    finally:
        reader.close()
        await writer.finish()
        os.close(out_r)


async def test_stdout_has_backpressure_a_client_that_stops_reading_stops_the_writer() -> None:
    reader, writer, in_w, out_r = await _pipes(cap=4096)
    try:
        text = "y" * 10_000
        note = types.JSONRPCNotification(
            jsonrpc="2.0", method="notifications/message", params={"data": text}
        )
        sent = 0

        async def flood() -> None:
            nonlocal sent
            while True:
                await writer.send(SessionMessage(note))
                sent += 1

        with anyio.move_on_after(1.0):
            await flood()
        # The pipe (64 KiB here) and the transport's buffer hold what was sent; past
        # the high-water mark the sender waits instead of buffering more.
        assert 0 < sent * len(text) < WRITE_HIGH_WATER + (1 << 20)
        assert writer._transport is not None
        assert writer._transport.get_write_buffer_size() <= WRITE_HIGH_WATER + 2 * len(text)
        # A reader again: the waiting sender goes on.
        drained = asyncio.get_running_loop().run_in_executor(None, _read_lines, out_r)
        with anyio.fail_after(10):
            await writer.send(SessionMessage(note))
        await drained
    finally:
        os.close(in_w)
        reader.close()
        await writer.finish()
        os.close(out_r)


def _vm_hwm(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def test_toolfold_mcp_drops_a_line_over_its_cap_without_holding_it(tmp_path: Path) -> None:
    # The SDK's own transport keeps a line however long it is; toolfold's server answers
    # it with one JSON-RPC error, its memory does not grow by the line, and it serves on.
    proc = subprocess.Popen(
        [*TOOLFOLD, "mcp", "--store", store_url(tmp_path), "--sandbox", "off"],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def reply() -> dict[str, Any]:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        assert ready, "no reply within 60 s"
        answer: dict[str, Any] = json.loads(proc.stdout.readline())
        return answer

    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        proc.stdin.write(_request(1, "initialize", init))
        proc.stdin.flush()
        assert "result" in reply()
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        before = _vm_hwm(proc.pid)
        head = b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "bash", '
        proc.stdin.write(head + b'"arguments": {"command": "echo ')
        chunk = b"z" * (1 << 20)
        for _ in range(3 * MAX_LINE_BYTES // len(chunk)):  # three times the cap
            proc.stdin.write(chunk)
        proc.stdin.write(b'"}}}\n')
        proc.stdin.flush()
        error = reply()
        assert error["id"] == 2 and error["error"]["code"] == types.INVALID_REQUEST, error
        assert "over the server's cap for one stdio line" in error["error"]["message"]
        call = {"name": "bash", "arguments": {"command": "echo still here"}}
        proc.stdin.write(_request(3, "tools/call", call))
        proc.stdin.flush()
        answer = reply()
        assert answer["id"] == 3
        assert answer["result"]["content"][0]["text"].startswith("still here")
        # At most the cap was held (then dropped), not the line.
        assert _vm_hwm(proc.pid) - before < 2 * MAX_LINE_BYTES
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_one_socket_as_stdin_and_stdout_is_served(tmp_path: Path) -> None:
    # An inetd-style launcher hands the server one socket as fd 0 and fd 1: the client's
    # requests arriving on it must not read as a hang-up of stdout.
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(
        [*TOOLFOLD, "mcp", "--store", "memory:", "--sandbox", "off"],
        cwd=tmp_path,
        env=clean_env(),
        stdin=theirs,
        stdout=theirs,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    theirs.close()
    ours.settimeout(60)
    wire = ours.makefile("rwb")
    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        }
        wire.write(_request(1, "initialize", init))
        wire.flush()
        assert "result" in json.loads(wire.readline())
        wire.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = {"name": "bash", "arguments": {"command": "echo over one socket"}}
        wire.write(_request(2, "tools/call", call))
        wire.flush()
        answer = json.loads(wire.readline())
        assert answer["id"] == 2
        assert answer["result"]["content"][0]["text"].startswith("over one socket")
        ours.shutdown(socket.SHUT_WR)  # stdin ends: the server exits by itself
        assert proc.wait(timeout=60) == 0
    finally:
        wire.close()
        ours.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
