"""A stdio client transport for an upstream MCP server that never buffers past a cap.

The SDK's ``stdio_client`` keeps a whole line in memory however long it is (and
re-joins its buffer on every chunk, so a single 100 MB line costs minutes). Here a
line is kept as bytes up to ``cap``; past it the rest of the line is read and
dropped, and the request it answered gets a JSON-RPC error naming the cap, found
from the ``"id"`` at the start or end of the line. Memory stays at most ``cap``
plus one read chunk, whatever the upstream sends.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""Largest upstream message the proxy reads (256 MiB)."""

_EDGE = 512
"""Bytes kept from each end of an oversized line, to find its ``"id"``."""

_ID_AT_START = re.compile(rb'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_ID_AT_END = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$')


def _request_id(head: bytes, tail: bytes) -> int | str | None:
    # A response's "id" is a top-level member: writers put it first (Python's SDK) or
    # last (JavaScript's JSON.stringify of {result, jsonrpc, id}).
    found = _ID_AT_START.search(head) or _ID_AT_END.search(tail)
    if found is None:
        return None
    value = json.loads(found.group(1))  # a JSON number or string literal, escapes and all
    return value if isinstance(value, int | str) else None


def oversized(
    head: bytes, tail: bytes, size: int, cap: int, who: str
) -> SessionMessage | Exception:
    """What the session receives instead of a line over ``cap``."""
    message = (
        f"the {who} sent a message of more than {cap:,} bytes ({size:,} read), over the "
        "proxy's --max-message-bytes cap; it was dropped without being buffered"
    )
    request_id = _request_id(head, tail)
    if request_id is None:
        return ValueError(message)
    error = types.ErrorData(code=types.INTERNAL_ERROR, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def _read(
    process: Process, out: MemoryObjectSendStream[SessionMessage | Exception], cap: int, who: str
) -> None:
    assert process.stdout is not None
    line = bytearray()
    dropped = 0  # > 0 while skipping the rest of an oversized line
    head = tail = b""
    async with out:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            async for chunk in process.stdout:
                start = 0
                while start <= len(chunk):
                    end = chunk.find(b"\n", start)
                    piece = chunk[start:] if end < 0 else chunk[start:end]
                    if dropped:
                        dropped += len(piece)
                        tail = (tail + piece)[-_EDGE:]
                    elif len(line) + len(piece) > cap:
                        head = bytes(line[:_EDGE]) if line else piece[:_EDGE]
                        tail = (bytes(line[-_EDGE:]) + piece)[-_EDGE:]
                        dropped = len(line) + len(piece)
                        line = bytearray()
                    else:
                        line += piece
                    if end < 0:
                        break
                    if dropped:
                        await out.send(oversized(head, tail, dropped, cap, who))
                        dropped = 0
                    elif line.strip():
                        await out.send(_parse(bytes(line)))
                    line = bytearray()
                    start = end + 1


async def _write(process: Process, inbox: MemoryObjectReceiveStream[SessionMessage]) -> None:
    assert process.stdin is not None
    async with inbox:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for message in inbox:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")


@contextlib.asynccontextmanager
async def capped_stdio_client(
    command: list[str], *, errlog: TextIO, cap: int, who: str
) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` to ``command`` over its stdin/stdout, reading at
    most ``cap`` bytes of any one message. Leaving the block closes stdin, then stops
    the process (SIGTERM after 2 s, SIGKILL after 2 more)."""
    process = await anyio.open_process(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        env=get_default_environment(),
    )
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as group:
        group.start_soon(_read, process, read_in, cap, who)
        group.start_soon(_write, process, write_out)
        try:
            yield read_out, write_in
        finally:
            with anyio.CancelScope(shield=True):
                await write_in.aclose()
                if process.stdin is not None:
                    with contextlib.suppress(Exception):
                        await process.stdin.aclose()
                with anyio.move_on_after(2):
                    await process.wait()
                if process.returncode is None:
                    process.terminate()
                    with anyio.move_on_after(2):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                await read_out.aclose()
            group.cancel_scope.cancel()


__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "capped_stdio_client", "oversized"]
