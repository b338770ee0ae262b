"""A stdio client transport for an upstream MCP server that never buffers past a cap.

The SDK's ``stdio_client`` keeps a whole line in memory however long it is (and
re-joins its buffer on every chunk, so a single 100 MB line costs minutes). Here
each line goes through the proxy's message cap (``_message_cap``): kept as bytes up
to ``cap``, past it read and dropped, the request it answered getting an error.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from ._message_cap import Framer, Oversized, oversized


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


EXIT_WAIT = 2.0
"""Seconds an upstream that closed its stdout gets to exit, so its status can be told."""


@dataclass
class Exit:
    """How the upstream process ended: set before the session learns its stdout closed."""

    returncode: int | None = None

    def describe(self) -> str:
        """``exited with status 3``, ``was killed by signal 9 (SIGKILL)``, or (still
        running) ``closed its stdout``."""
        code = self.returncode
        if code is None:
            return "closed its stdout"
        if code >= 0:
            return f"exited with status {code}"
        try:
            name = f" ({signal.Signals(-code).name})"
        except ValueError:
            name = ""
        return f"was killed by signal {-code}{name}"


async def _read(
    process: Process,
    out: MemoryObjectSendStream[SessionMessage | Exception],
    cap: int,
    who: str,
    ended: Exit,
) -> None:
    assert process.stdout is not None
    framer = Framer(cap)
    async with out:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            async for chunk in process.stdout:
                for line in framer.feed(chunk):
                    if isinstance(line, Oversized):
                        await out.send(oversized(line.head, line.tail, line.size, cap, who))
                    elif line.strip():
                        await out.send(_parse(line))
        # Before closing `out`: the calls it fails then say how the upstream ended.
        with anyio.move_on_after(EXIT_WAIT):
            await process.wait()
        ended.returncode = process.returncode


async def _write(process: Process, inbox: MemoryObjectReceiveStream[SessionMessage]) -> None:
    assert process.stdin is not None
    async with inbox:
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            async for message in inbox:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode() + b"\n")


@contextlib.asynccontextmanager
async def capped_stdio_client(
    command: list[str], *, errlog: TextIO, cap: int, who: str, ended: Exit | None = None
) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` to ``command`` over its stdin/stdout, reading at
    most ``cap`` bytes of any one message; ``ended`` learns how the process ended.
    Leaving the block closes stdin, then stops the process (SIGTERM after 2 s,
    SIGKILL after 2 more)."""
    process = await anyio.open_process(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=errlog,
        # The proxy's whole environment, as any wrapper command passes it on: a
        # client's "env" for the server (a token, say) is set on the proxy's command.
        # The SDK's stdio client would keep only HOME, PATH and a few more.
        env=None,
    )
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as group:
        group.start_soon(_read, process, read_in, cap, who, ended or Exit())
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


__all__ = ["Exit", "capped_stdio_client"]
