"""The stdio transport of ``toolfold mcp`` (and of the proxy's side facing its client).

Lines are read from stdin and written to stdout on the event loop's own pipes: no
worker thread per read or write, no relay task between the transport and the SDK's
session (the SDK's ``stdio_server`` hops to a thread for every line read and every
write and flush, and passes each message through a task of its own).

Bounded both ways:

- a line is held up to ``max_line`` bytes (``_message_cap.Framer``); a longer one is
  read to its end and dropped, never buffered, and answered with a one-line JSON-RPC
  error (the request's ``"id"`` when it can be read from the line's first bytes);
- stdout has backpressure: a write returns once the pipe took the message or the
  bytes still waiting for it are under ``WRITE_HIGH_WATER``; a client that stops
  reading stops the senders, it does not grow a buffer.

A line that is not a JSON-RPC message is answered with a JSON-RPC error and the server
serves on (the SDK's transport hands it to the session, which only logs it and leaves
the client waiting). As the SDK's transport does, fd 0 reads the null device and fd 1
writes to stderr while serving, so neither a handler's stray ``print`` nor a child
process reaches the wire; both are restored on exit.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import fcntl
import os
import stat
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Self

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from ._message_cap import Framer, Oversized, leading_id

MAX_LINE_BYTES = 16 * 1024 * 1024
"""Largest line (one JSON-RPC message) read from the client: tool arguments, not uploads
(a longer line is answered with an error and dropped without being held)."""

READ_CHUNK = 256 * 1024
"""Bytes read from stdin at a time."""

WRITE_HIGH_WATER = 256 * 1024
"""Bytes waiting for the client to read, above which a write waits (backpressure)."""

CLOSE_WAIT = 2.0
"""Seconds the messages still waiting for the client get to be written at the end."""

MAX_ERROR_DETAIL = 200
"""Characters of the decoder's complaint quoted back in a parse error."""


def protocol_error(exc: Exception) -> SessionMessage:
    """The JSON-RPC error answering a line that is not a JSON-RPC message: -32700 for
    text that is not JSON, -32600 for JSON that is not a valid message (``id`` is
    null: it could not be read)."""
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    not_json = any(e.get("type") == "json_invalid" for e in errors)
    code, what = (
        (types.PARSE_ERROR, "Parse error: the message is not valid JSON")
        if not_json or not errors
        else (types.INVALID_REQUEST, "Invalid Request: the JSON is not a JSON-RPC 2.0 message")
    )
    detail = " ".join(str(errors[0].get("msg", exc) if errors else exc).split())
    message = f"{what} ({detail[:MAX_ERROR_DETAIL]}); the server keeps serving"
    error = types.ErrorData(code=code, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=None, error=error))


def line_too_long(line: Oversized, cap: int) -> SessionMessage:
    """The JSON-RPC error answering a line over ``cap``: to its request's ``"id"`` when
    the line starts with it (as the SDKs write a request), else with a null ``id``."""
    message = (
        f"Invalid Request: a message of more than {cap:,} bytes ({line.size:,} read), over "
        "the server's cap for one stdio line; it was read and dropped, never held in "
        "memory; the server keeps serving"
    )
    error = types.ErrorData(code=types.INVALID_REQUEST, message=message)
    request_id = leading_id(line.head)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


# -- the descriptors ---------------------------------------------------------------


class _Wire:
    """fd 0 or 1 claimed for the transport: the wire moved to a private descriptor (its
    own open file description where the kernel allows it, so its non-blocking mode
    reaches no other holder of the pipe: stderr after ``2>&1``, a child), the standard
    descriptor pointed at the null device (stdin) or stderr (stdout) until ``release``.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.saved: int | None = None  # the wire, kept above the standard range
        self.own: int | None = None  # what the transport reads or writes
        self.blocking: bool | None = None  # to restore, on a shared description
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            return  # no such descriptor: nothing to read (stdin), writes are dropped
        self.saved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
        flags = os.O_RDONLY if fd == 0 else os.O_WRONLY
        if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
            # A pipe or a terminal opened anew: a description of its own.
            with contextlib.suppress(OSError):
                self.own = os.open(f"/proc/self/fd/{self.saved}", flags | os.O_CLOEXEC)
        if self.own is None:
            self.own = fcntl.fcntl(self.saved, fcntl.F_DUPFD_CLOEXEC, 3)
            self.blocking = os.get_blocking(self.own)
        try:
            diversion = os.open(os.devnull, os.O_RDONLY) if fd == 0 else os.dup(2)
        except OSError:
            diversion = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(diversion, fd)
        finally:
            os.close(diversion)

    def release(self) -> None:
        """Point the standard descriptor back at the wire."""
        if self.saved is None:
            return
        if self.blocking is not None:
            with contextlib.suppress(OSError):
                os.set_blocking(self.saved, self.blocking)
        with contextlib.suppress(OSError):
            os.dup2(self.saved, self.fd)
        with contextlib.suppress(OSError):
            os.close(self.saved)
        self.saved = None


# -- the streams the SDK's session reads and writes --------------------------------


class _Stream:
    """What anyio's streams offer besides their data: ``aclose`` and ``async with``,
    both ending in the stream's ``close``."""

    def close(self) -> None:
        raise NotImplementedError

    async def aclose(self) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        self.close()


# -- reading -----------------------------------------------------------------------


class LineReader(_Stream):
    """The SDK's read stream: the client's messages, one per line of stdin; a line
    that is not one is answered (through ``replies``) and skipped."""

    def __init__(self, fd: int | None, replies: LineWriter, max_line: int) -> None:
        self._fd = fd
        self._replies = replies
        self._cap = max_line
        self._framer = Framer(max_line)
        # In the order the lines came: a message for the session, or (``True``) the
        # error answering a line that was not one.
        self._ready: collections.deque[tuple[bool, SessionMessage]] = collections.deque()
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._eof = fd is None
        self._closed = False

    async def start(self) -> None:
        """Attach stdin to the event loop (a regular file is read as is: it never
        blocks)."""
        if self._fd is None or not _pollable(self._fd):
            return
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=READ_CHUNK, loop=loop)
        pipe = open(self._fd, "rb", buffering=0, closefd=False)  # noqa: SIM115 - the transport closes it
        try:
            transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe
            )
        except ValueError:  # a regular file: not a pipe, socket or terminal
            return
        self._reader, self._transport = reader, transport

    async def _chunk(self) -> bytes:
        if self._reader is not None:
            return await self._reader.read(READ_CHUNK)
        assert self._fd is not None
        await anyio.lowlevel.checkpoint()
        return os.read(self._fd, READ_CHUNK)

    def _take(self, line: bytearray | Oversized) -> None:
        if isinstance(line, Oversized):
            self._ready.append((True, line_too_long(line, self._cap)))
            return
        if not line or line.isspace():
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except Exception as exc:  # whatever the decoder says is answered, not raised
            self._ready.append((True, protocol_error(exc)))
            return
        self._ready.append((False, SessionMessage(message)))

    async def receive(self) -> SessionMessage:
        """The next message; ``anyio.EndOfStream`` once stdin closed."""
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            while self._ready:
                answer, message = self._ready.popleft()
                if not answer:
                    return message
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await self._replies.send(message)
            if self._eof:
                raise anyio.EndOfStream
            try:
                chunk = await self._chunk()
            except OSError:
                chunk = b""
            if chunk:
                for line in self._framer.feed(chunk):
                    self._take(line)
            else:
                self._eof = True
                last = self._framer.leftover()
                if last is not None:
                    self._take(last)

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Stop reading (the descriptor itself is the claim's)."""
        self._closed = True
        if self._transport is not None:
            self._transport.close()


# -- writing -----------------------------------------------------------------------


class _Flow(asyncio.Protocol):
    """Flow control of stdout's transport (paused above its high-water mark), and
    whether it is gone."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._room: asyncio.Future[None] | None = None
        self.gone: asyncio.Future[None] = loop.create_future()

    def pause_writing(self) -> None:
        if self._room is None or self._room.done():
            self._room = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._room is not None and not self._room.done():
            self._room.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.gone.done():
            self.gone.set_result(None)
        if self._room is not None and not self._room.done():
            self._room.set_exception(BrokenPipeError("stdout closed"))
            self._room.exception()  # retrieved: a waiter may not be there

    async def drain(self) -> None:
        """Return once the transport is below its high-water mark (``ConnectionError``
        once it is gone)."""
        if self.gone.done():
            raise BrokenPipeError("stdout closed")
        if self._room is not None and not self._room.done():
            await asyncio.shield(self._room)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class LineWriter(_Stream):
    """The SDK's write stream: each message one line on stdout, written by the loop
    (a message is sent whole or not at all: it never tears another's line)."""

    def __init__(self, fd: int | None) -> None:
        self._fd = fd
        self._transport: asyncio.WriteTransport | None = None
        self._flow: _Flow | None = None
        self._turn = asyncio.Lock()  # direct writes: one message at a time
        self._closed = False
        self._broken = fd is None

    async def start(self, *, direct: bool = False) -> None:
        """Attach stdout to the event loop: asyncio's pipe transport, or (``direct``, and
        for a regular file) writes of the loop's own, waiting for the descriptor to take
        more when it is full. ``direct`` is for a socket that is stdin too: asyncio's
        transport would take the client's requests arriving on it for a hang-up."""
        if self._fd is None or direct or not _pollable(self._fd):
            return
        loop = asyncio.get_running_loop()
        pipe = open(self._fd, "wb", buffering=0, closefd=False)  # noqa: SIM115 - the transport closes it
        try:
            transport, flow = await loop.connect_write_pipe(lambda: _Flow(loop), pipe)
        except ValueError:  # a regular file
            return
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self._transport, self._flow = transport, flow

    async def _write_direct(self, data: bytes) -> None:
        fd = self._fd
        assert fd is not None
        loop = asyncio.get_running_loop()
        async with self._turn:
            view = memoryview(data)
            while view:
                try:
                    view = view[os.write(fd, view) :]
                except BlockingIOError:
                    room: asyncio.Future[None] = loop.create_future()
                    loop.add_writer(fd, _wake, room)
                    try:
                        await room
                    finally:
                        loop.remove_writer(fd)
                except OSError as exc:
                    self._broken = True
                    raise anyio.BrokenResourceError from exc

    async def send(self, item: SessionMessage) -> None:
        """Write ``item`` as one line; returns once the client's pipe has room for more
        (``anyio.BrokenResourceError`` once the client closed it)."""
        if self._closed:
            raise anyio.ClosedResourceError
        if self._broken:
            raise anyio.BrokenResourceError
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
        transport, flow = self._transport, self._flow
        if transport is None or flow is None:
            await self._write_direct(data)
            return
        if transport.is_closing():
            self._broken = True
            raise anyio.BrokenResourceError
        transport.write(data)
        try:
            await flow.drain()
        except ConnectionError as exc:
            self._broken = True
            raise anyio.BrokenResourceError from exc

    async def finish(self) -> None:
        """Close stdout's transport once what waits for the client is written (at
        most ``CLOSE_WAIT`` seconds)."""
        self._closed = True
        if self._transport is None or self._flow is None:
            return
        self._transport.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._flow.gone), CLOSE_WAIT)
        if not self._flow.gone.done():
            self._transport.abort()

    def close(self) -> None:
        """No more messages (what was written still reaches the client)."""
        self._closed = True


def _pollable(fd: int) -> bool:
    """Whether the loop can wait on ``fd``: a pipe, a socket or a terminal. A regular
    file or a device such as /dev/null cannot be polled; it never blocks either, so it
    is read and written as is."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def _one_socket(fd_in: int | None, fd_out: int | None) -> bool:
    """Whether stdin and stdout are one socket (an inetd-style launcher's)."""
    if fd_in is None or fd_out is None:
        return False
    try:
        a, b = os.fstat(fd_in), os.fstat(fd_out)
    except OSError:
        return False
    return stat.S_ISSOCK(a.st_mode) and (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


@contextlib.asynccontextmanager
async def loop_stdio(
    max_line: int = MAX_LINE_BYTES,
) -> AsyncIterator[tuple[LineReader, LineWriter]]:
    """``(read_stream, write_stream)`` for the SDK's ``Server.run`` on this process's
    stdin and stdout (see the module's docstring)."""
    wire_in, wire_out = _Wire(0), _Wire(1)
    writer = LineWriter(wire_out.own)
    reader = LineReader(wire_in.own, writer, max_line)
    try:
        await writer.start(direct=_one_socket(wire_in.own, wire_out.own))
        await reader.start()
        yield reader, writer
    finally:
        reader.close()
        with anyio.CancelScope(shield=True):
            await writer.finish()
        for wire in (wire_in, wire_out):
            if wire.own is not None and wire.saved is not None:
                with contextlib.suppress(OSError):
                    os.close(wire.own)
            wire.release()


__all__: list[str] = [
    "MAX_LINE_BYTES",
    "LineReader",
    "LineWriter",
    "line_too_long",
    "loop_stdio",
    "protocol_error",
]
