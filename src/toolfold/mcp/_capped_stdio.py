"""A stdio client transport for an upstream MCP server that never buffers past a cap.

The SDK's ``stdio_client`` keeps a whole line in memory however long it is (and
re-joins its buffer on every chunk, so a single 100 MB line costs minutes). Here
each line goes through the proxy's message cap (``_message_cap``): kept as bytes up
to ``cap``, past it read and dropped, the request it answered getting an error.
A line that does not parse (bytes that are not UTF-8, JSON nested past the parser's
limit) is dropped the same way: the call it answered gets the parser's reason at
once, and the connection serves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import signal
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import mcp_types as types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from pydantic_core import from_json

from ._message_cap import _EDGE, Framer, Oversized, Unmatched, error_for, oversized, rejected

MAX_UPSTREAM_REQUESTS = 64
"""Requests of the upstream's (sampling, elicitation, roots) left unanswered before
the proxy stops reading its stdout until one is answered: each waiting request is a
task, so an upstream that floods requests and never reads the answers is paused."""

Gate = Callable[[], Awaitable[None]]
"""Awaited before each read of the upstream's stdout: it returns when the proxy may
read on (its client is reading again)."""


def _parse(data: bytes, who: str) -> SessionMessage | Unmatched:
    # Parsed to Python objects straight from the bytes, then validated: the message
    # is held twice at most (the bytes and its strings). The SDK's validate_json
    # would hold it four times over.
    try:
        parsed = types.jsonrpc_message_adapter.validate_python(from_json(data), by_name=False)
        return SessionMessage(parsed)
    except ValidationError:
        reason = "not a JSON-RPC request, notification or response"
    except ValueError as exc:  # the parser's own words: "invalid unicode code point ..."
        reason = str(exc)
    said = f"the {who} sent a message that is not valid JSON-RPC ({reason}); it was dropped"
    return rejected(data[:_EDGE], data[-_EDGE:], said)


def _key(request_id: Any) -> str:
    return str(request_id)


class Ledger:
    """The requests in flight both ways, as the transport sees them pass.

    ``ours``: the proxy's requests the upstream has not answered, oldest first. A
    dropped message whose ``"id"`` cannot be read (``Unmatched``) is taken as the
    answer to the oldest: the call that waits longest fails at once, with the reason,
    instead of never answering (the others keep waiting for their own answers).
    ``theirs``: the upstream's requests the proxy has not answered (bounded: above
    ``MAX_UPSTREAM_REQUESTS`` the transport stops reading the upstream)."""

    def __init__(self) -> None:
        self.ours: dict[str, Any] = {}
        self.theirs: set[str] = set()
        self._room = anyio.Event()

    def sent(self, message: types.JSONRPCMessage) -> None:
        """A message the proxy wrote to the upstream."""
        if isinstance(message, types.JSONRPCRequest):
            self.ours[_key(message.id)] = message.id
        elif isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self.theirs.discard(_key(message.id))
            self._room.set()
        elif message.method == "notifications/cancelled":
            # A cancelled request is never answered: it must not be "the oldest".
            self.ours.pop(_key((message.params or {}).get("requestId")), None)

    def received(self, item: SessionMessage | Unmatched) -> SessionMessage | Unmatched:
        """A message read from the upstream, or what replaces a dropped one."""
        if isinstance(item, Unmatched):
            if item.reply and self.ours:
                key = next(iter(self.ours))
                return SessionMessage(error_for(self.ours.pop(key), str(item)))
            return item
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if message.id is not None:
                self.ours.pop(_key(message.id), None)
        elif isinstance(message, types.JSONRPCRequest):
            self.theirs.add(_key(message.id))
        return item

    async def room(self) -> None:
        """Return once fewer than ``MAX_UPSTREAM_REQUESTS`` of the upstream's requests
        wait for an answer."""
        while len(self.theirs) >= MAX_UPSTREAM_REQUESTS:
            self._room = anyio.Event()
            await self._room.wait()


EXIT_WAIT = 2.0
"""Seconds an upstream that closed its stdout gets to exit, so its status can be told."""


@dataclass
class Exit:
    """How the upstream process ended: set before the session learns its stdout closed.
    ``closed`` tells a real end of the stream from an upstream's error that happens to
    use the code the SDK gives a closed connection (-32000)."""

    returncode: int | None = None
    closed: bool = False

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


QUIET = 0.1
"""Seconds a read of an exited upstream's stdout waits for more before it ends."""


class _ExitWatch:
    """Ends the reading of an upstream that exited while a process it started holds
    its stdout open (npx's children can, for ever): without it the proxy would wait on
    that stdout, and every pending call with it, instead of saying the upstream exited."""

    def __init__(self) -> None:
        self.exited = False
        self.waiting: anyio.CancelScope | None = None

    async def run(self, process: Process) -> None:
        await process.wait()
        await anyio.sleep(EXIT_WAIT)  # what it wrote before exiting is read meanwhile
        self.exited = True
        if self.waiting is not None:
            self.waiting.cancel()


async def _read(
    process: Process,
    out: MemoryObjectSendStream[SessionMessage | Exception],
    cap: int,
    who: str,
    ended: Exit,
    ledger: Ledger,
    gate: Gate | None,
    watch: _ExitWatch,
) -> None:
    assert process.stdout is not None
    framer = Framer(cap)
    async with out:
        with contextlib.suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError
        ):
            while True:
                await ledger.room()
                if gate is not None:
                    await gate()
                # Once the upstream exited (and its stdout had EXIT_WAIT to drain), a
                # read that finds nothing within QUIET is the end of the stream.
                quiet = anyio.current_time() + QUIET if watch.exited else math.inf
                with anyio.CancelScope(deadline=quiet) as waiting:
                    watch.waiting = waiting
                    chunk = await process.stdout.receive()
                watch.waiting = None
                if waiting.cancelled_caught:
                    break
                lines = framer.feed(chunk)
                lines.reverse()
                while lines:
                    line = lines.pop()  # each line is let go of once parsed
                    if isinstance(line, Oversized):
                        item = oversized(line.head, line.tail, line.size, cap, who)
                    elif line and not line.isspace():
                        data = bytes(line)
                        del line  # before parsing: the bytes and the parsed strings only
                        item = _parse(data, who)
                        del data
                    else:
                        continue
                    item = ledger.received(item)
                    try:
                        # Straight to a receiver already waiting, without the turn of
                        # the loop `send` takes first; else wait for one (the bound).
                        out.send_nowait(item)
                    except anyio.WouldBlock:
                        await out.send(item)
        ended.closed = True
        # Before closing `out`: the calls it fails then say how the upstream ended.
        with anyio.move_on_after(EXIT_WAIT):
            await process.wait()
        ended.returncode = process.returncode


class _PipeWriter:
    """The session's write stream: each message is written to the upstream's stdin
    in the sender's own task, with no writer task and memory stream in between (one
    task switch and a turn of the loop fewer per message). One line is one ``write``
    to the pipe's transport, so concurrent senders' lines never interleave; each
    sender then waits for the pipe to drain, so none runs ahead of an upstream that
    does not read. Once a write fails (the upstream closed its stdin or exited) that
    message is dropped and every later send raises ``BrokenResourceError``: the calls
    waiting for answers learn of the end from the read side.

    On asyncio, the line goes to the ``asyncio.StreamWriter`` under anyio's stream
    (``write``, then ``drain``, which waits only while the pipe is full): the same
    write and wait without the turn of the loop anyio's ``send`` takes after each
    write that did not wait (docs/BENCHMARKS.md, "Sixth round: the proxy's CPU")."""

    def __init__(self, process: Process, ledger: Ledger) -> None:
        assert process.stdin is not None
        self._stdin = process.stdin
        under = getattr(process.stdin, "_stream", None)
        self._writer = under if isinstance(under, asyncio.StreamWriter) else None
        self._ledger = ledger
        self._closed = False
        self._broken = False

    async def send(self, message: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        # A sender cancelled already stops here, before its message is in the ledger:
        # from the ledger's entry to the pipe's write nothing yields to the loop.
        await anyio.lowlevel.checkpoint_if_cancelled()
        self._ledger.sent(message.message)
        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
        line = data.encode() + b"\n"
        del data
        try:
            if self._writer is not None:
                self._writer.write(line)
                del line
                await self._writer.drain()
            else:
                await self._stdin.send(line)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            self._broken = True

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _PipeWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def capped_stdio_client(
    command: list[str],
    *,
    errlog: TextIO,
    cap: int,
    who: str,
    ended: Exit | None = None,
    gate: Gate | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """``(read_stream, write_stream)`` to ``command`` over its stdin/stdout, reading at
    most ``cap`` bytes of any one message; ``ended`` learns how the process ended,
    ``gate`` is awaited before each read (see ``Gate``).
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
    ledger = Ledger()
    write_in = _PipeWriter(process, ledger)
    watch = _ExitWatch()
    async with anyio.create_task_group() as group:
        group.start_soon(_read, process, read_in, cap, who, ended or Exit(), ledger, gate, watch)
        group.start_soon(watch.run, process)
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
                # asyncio closes a subprocess transport itself only once the process
                # exited and its stdout reached end of file, which never happens while a
                # process the upstream started holds that stdout (npx's children do).
                # Closed now, not by the garbage collector after the event loop has
                # closed (which prints "Event loop is closed" from its __del__).
                transport = getattr(getattr(process, "_process", None), "_transport", None)
                if transport is not None:
                    transport.close()
            group.cancel_scope.cancel()


__all__ = ["MAX_UPSTREAM_REQUESTS", "Exit", "Gate", "Ledger", "capped_stdio_client"]
