"""``RemoteExecEnv``: ``LocalExecEnv``'s ``exec`` contract, run by an exec host elsewhere.

Capture, window, spill and pacing happen on the exec host (``toolfold exec-host``,
which runs a ``LocalExecEnv``); this side receives the bounded updates it publishes,
passes them to ``on_update`` and returns the same ``ShellExecResult``. Spill paths in
the metadata name files on the exec host. One transport process serves every call
(requests carry ids); after it drops, the next call starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolfold import _otel

from ._errors import (
    CallbackError,
    ExecConfigError,
    ExecError,
    ProtocolError,
    TransportError,
)
from ._exec_result import ShellExecResult
from ._limits import CaptureOptions
from ._output_view import ShellOutputView
from ._protocol import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    capture_to_dict,
    decode,
    encode,
    error_from_dict,
    result_from_dict,
)
from ._remote_background import RemoteBackground
from ._session import UpdateConsumer
from ._tracing import traced_exec
from ._transport import Transport
from ._updates import apply_shell_output_update, update_from_dict

_STDERR_TAIL = 4096
_NOT_FOUND = re.compile(
    rb"command not found|not found|No such file or directory|executable file not found"
)


@dataclass(frozen=True)
class HostInfo:
    """What the exec host said about itself in its hello."""

    protocol: int
    toolfold: str
    pid: int
    python: str
    cwd: str
    spill_dir: str


@dataclass
class _Pending:
    what: str
    on_update: UpdateConsumer | None = None
    future: asyncio.Future[dict[str, Any]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    view: ShellOutputView | None = None
    updates: int = 0
    callback_error: CallbackError | None = None


class _Connection:
    """One running transport process and the requests in flight on it."""

    def __init__(self, env: RemoteExecEnv, process: asyncio.subprocess.Process) -> None:
        self.env = env
        self.process = process
        self.pending: dict[int, _Pending] = {}
        self.next_id = 1
        self.stderr = bytearray()
        self.closed = False
        self.info: HostInfo | None = None
        self.reader: asyncio.Task[None] | None = None
        self.discard: asyncio.Future[None] | None = None
        self.stderr_pump = asyncio.ensure_future(self._pump_stderr())

    async def _pump_stderr(self) -> None:
        stream = self.process.stderr
        if stream is None:  # pragma: no cover - started with stderr=PIPE
            return
        while chunk := await stream.read(4096):
            self.stderr += chunk
            del self.stderr[:-_STDERR_TAIL]

    def stderr_text(self) -> str:
        text = self.stderr.decode("utf-8", "replace").strip()
        return " ".join(text.split())[-600:]

    async def send(self, message: dict[str, Any]) -> None:
        stdin = self.process.stdin
        if self.closed or stdin is None or stdin.is_closing():
            raise TransportError(self.env._lost("before the request could be sent", self))
        data = encode(message)
        try:
            stdin.write(data)
            await stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            raise TransportError(self.env._lost("while sending a request", self)) from exc
        self.env.bytes_sent += len(data)

    async def read_message(self) -> dict[str, Any] | None:
        stdout = self.process.stdout
        if stdout is None:  # pragma: no cover - started with stdout=PIPE
            return None
        try:
            line = await stdout.readline()
        except (ValueError, asyncio.LimitOverrunError) as exc:
            raise ProtocolError(
                f"the exec host ({self.env.transport.describe()}) sent a message longer than "
                f"{MAX_LINE_BYTES} bytes"
            ) from exc
        if not line:
            return None
        self.env.bytes_received += len(line)
        return decode(line)

    async def _discard_stdout(self) -> None:
        stdout = self.process.stdout
        if stdout is None:  # pragma: no cover - started with stdout=PIPE
            return
        with contextlib.suppress(Exception):
            while await stdout.read(1 << 16):
                pass

    async def read_loop(self) -> None:
        failure: TransportError | None = None
        try:
            while (message := await self.read_message()) is not None:
                await self._deliver(message)
        except TransportError as exc:
            failure = exc
        finally:
            self.closed = True
            stdin = self.process.stdin
            if stdin is not None and not stdin.is_closing():
                stdin.close()  # the host kills what it runs when its input closes
            if failure is not None:
                # Nobody reads the rest, but the pipe must reach EOF: asyncio's
                # Process.wait() only returns once its pipes are closed.
                self.discard = asyncio.ensure_future(self._discard_stdout())
            if self.pending:
                with contextlib.suppress(TimeoutError):
                    # ssh exits a moment after the channel closes; its status and stderr
                    # make the message (a reset connection, a killed client...).
                    await asyncio.wait_for(asyncio.shield(self.process.wait()), 2.0)
            for pending in list(self.pending.values()):
                if not pending.future.done():
                    error = TransportError(
                        str(failure)
                        if failure is not None
                        else self.env._lost(f"while running {pending.what}", self)
                    )
                    error.partial = pending.view
                    pending.future.set_exception(error)

    async def _deliver(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        pending = self.pending.get(request_id) if isinstance(request_id, int) else None
        op = message["op"]
        if op == "error" and request_id == 0:
            raise ProtocolError(
                f"the exec host ({self.env.transport.describe()}) refused the session: "
                f"{message.get('message')}"
            )
        if pending is None:
            return  # a late message for a request that gave up waiting
        if op == "update":
            try:
                update = update_from_dict(message.get("update"))
                view = apply_shell_output_update(pending.view, update)
            except ExecError as exc:
                raise ProtocolError(
                    f"the exec host ({self.env.transport.describe()}) sent an update that does "
                    f"not apply: {exc}"
                ) from exc
            pending.view = view
            pending.updates += 1
            if pending.callback_error is None and pending.on_update is not None:
                # Awaited inline: a slow consumer stops this reader, the transport's
                # buffers fill, and the host's publisher slows down — no queue here.
                try:
                    outcome = pending.on_update(update)
                    if inspect.isawaitable(outcome):
                        await outcome
                except Exception as exc:
                    error = CallbackError(
                        f"the on_update consumer raised {type(exc).__name__}: {exc}; "
                        "the command was stopped because its output could not be delivered"
                    )
                    error.__cause__ = exc
                    pending.callback_error = error
                    with contextlib.suppress(TransportError):
                        await self.send({"op": "cancel", "id": request_id})
        elif op in ("result", "error") and not pending.future.done():
            pending.future.set_result(message)


class RemoteExecEnv:
    """Runs commands through ``toolfold exec-host`` on the other end of ``transport``.

    ``exec`` has ``LocalExecEnv.exec``'s contract (same arguments, same result, same
    update stream, same errors) plus ``TransportError`` when the host cannot be reached
    or the connection drops; ``call`` runs a file operation there (``stat``,
    ``read_bytes``, ``read_lines``, ``grep``) for the remote ``read`` and ``grep`` tools.
    ``spill_dir`` is a directory on the exec host: absolute or ``~/...`` (its home), or
    relative to the host's ``--spill-dir`` (default ``~/.toolfold/spill``); ``None`` is
    that directory itself. ``cwd`` given to ``exec`` is a path there;
    ``None`` is the directory the host started in (the login directory for ssh).
    """

    def __init__(
        self,
        transport: Transport,
        *,
        spill_dir: str | None = None,
        connect_timeout: float = 30.0,
        stop_timeout: float = 15.0,
    ) -> None:
        if not isinstance(transport, Transport):
            raise ExecConfigError(
                f"RemoteExecEnv needs a Transport (SSHTransport, CommandTransport), got {transport!r}"
            )
        self.transport = transport
        self.spill_dir = spill_dir
        self.connect_timeout = connect_timeout
        self.stop_timeout = stop_timeout
        self.bytes_received = 0
        """Protocol bytes read from the transport, over every connection."""
        self.bytes_sent = 0
        """Protocol bytes written to the transport, over every connection."""
        self._connection: _Connection | None = None
        self._lock: asyncio.Lock | None = None
        self.background = RemoteBackground(self._bg_request)
        """The exec host's background commands (``exec(..., yield_after=...)``)."""

    def _lost(self, when: str, connection: _Connection) -> str:
        code = connection.process.returncode
        why = connection.stderr_text() or (
            f"{self.transport.argv()[0]} exited with status {code}"
            if code is not None
            else "its output closed"
        )
        return (
            f"the connection to the exec host ({self.transport.describe()}) was lost {when}: "
            f"{why}; the output received so far is kept, and the exec host kills the "
            "command's processes when its input closes"
        )

    @property
    def host(self) -> HostInfo | None:
        """The connected host's hello, or ``None`` before the first connection."""
        return self._connection.info if self._connection is not None else None

    @property
    def process_pid(self) -> int | None:
        """Pid of the local transport process (``ssh``, ``docker``), while connected."""
        c = self._connection
        return c.process.pid if c is not None and not c.closed else None

    async def connect(self) -> HostInfo:
        """Start the transport and do the handshake, unless connected already."""
        return (await self._connect()).info  # type: ignore[return-value]

    async def _connect(self) -> _Connection:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            c = self._connection
            if c is not None and not c.closed:
                return c
            self._connection = c = await self._start()
            return c

    async def _start(self) -> _Connection:
        argv = self.transport.argv()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=MAX_LINE_BYTES,
                # Its own session: a Ctrl-C on our terminal must not kill the transport
                # before we have cancelled the command cooperatively.
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(
                f"cannot start {argv[0]!r} to reach the exec host ({self.transport.describe()}): "
                f"{exc.strerror or exc}"
            ) from exc
        c = _Connection(self, process)
        try:
            c.info = await self._handshake(c)
        except BaseException:
            await self._stop(c)
            raise
        c.reader = asyncio.ensure_future(c.read_loop())
        return c

    async def _handshake(self, c: _Connection) -> HostInfo:
        where = self.transport.describe()
        try:
            hello = await asyncio.wait_for(c.read_message(), self.connect_timeout)
        except TimeoutError:
            raise TransportError(
                f"the exec host ({where}) did not answer within {self.connect_timeout:g} s: "
                f"{c.stderr_text() or 'no output'}"
            ) from None
        if hello is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(c.process.wait(), 5.0)
            await asyncio.sleep(0)  # let the stderr pump take the last chunk
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(c.stderr_pump), 1.0)
            code = c.process.returncode
            err = c.stderr_text()
            if code == 127 or _NOT_FOUND.search(c.stderr):
                raise TransportError(
                    f"toolfold exec-host is not installed on {where} "
                    f"({err or f'exit status {code}'}); {self.transport.install_hint()}"
                )
            raise TransportError(
                f"the exec host ({where}) closed before its hello (exit status {code}): "
                f"{err or 'no error output'}"
            )
        if hello.get("op") != "hello":
            raise ProtocolError(f"expected the exec host's hello from {where}, got {hello!r:.200}")
        theirs = hello.get("protocol")
        if theirs != PROTOCOL_VERSION:
            raise ProtocolError(
                f"the exec host on {where} speaks protocol version {theirs!r} "
                f"(toolfold {hello.get('toolfold')}), this side speaks version {PROTOCOL_VERSION}; "
                "install the same toolfold version on both sides"
            )
        await c.send({"op": "hello", "protocol": PROTOCOL_VERSION})
        try:
            return HostInfo(
                protocol=int(theirs),
                toolfold=str(hello.get("toolfold")),
                pid=int(hello["pid"]),
                python=str(hello["python"]),
                cwd=str(hello["cwd"]),
                spill_dir=str(hello["spill_dir"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(
                f"malformed hello from the exec host on {where}: {hello!r:.200}"
            ) from exc

    async def _stop(self, c: _Connection) -> None:
        c.closed = True
        stdin = c.process.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.close()  # EOF: the host cancels what runs and exits
        try:
            await asyncio.wait_for(asyncio.shield(c.process.wait()), self.stop_timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                c.process.kill()
            if c.discard is None:
                c.discard = asyncio.ensure_future(c._discard_stdout())
            # Bounded too: something that escaped the transport process may still hold
            # its pipes, and asyncio's wait() also waits for them.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(c.process.wait()), 5.0)
        for task in (c.reader, c.stderr_pump, c.discard):
            if task is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(task, 2.0)

    async def aclose(self) -> None:
        """Close the transport: the host kills whatever still runs and exits."""
        c, self._connection = self._connection, None
        if c is not None:
            await self._stop(c)

    async def __aenter__(self) -> RemoteExecEnv:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _request(
        self,
        message: dict[str, Any],
        pending: _Pending,
        cancel: asyncio.Event | None,
    ) -> dict[str, Any]:
        c = await self._connect()
        request_id = c.next_id
        c.next_id += 1
        message["id"] = request_id
        c.pending[request_id] = pending
        cancel_wait = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
        try:
            await c.send(message)
            waiters: set[asyncio.Future[Any]] = {pending.future}
            if cancel_wait is not None:
                waiters.add(cancel_wait)
            done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            if pending.future not in done:
                # Cancelled: the host kills the command and still answers with its final
                # state (cancelled=True), exactly like a local cancel.
                await self._send_cancel(c, request_id)
            return await pending.future
        except asyncio.CancelledError:
            # Task cancellation: stop the command there and wait (bounded) for its final
            # updates, as LocalExecEnv publishes before CancelledError propagates.
            await asyncio.shield(self._cancel_and_wait(c, request_id, pending))
            raise
        finally:
            if cancel_wait is not None and not cancel_wait.done():
                cancel_wait.cancel()
            c.pending.pop(request_id, None)

    async def _send_cancel(self, c: _Connection, request_id: int) -> None:
        with contextlib.suppress(TransportError):
            await c.send({"op": "cancel", "id": request_id})

    async def _cancel_and_wait(self, c: _Connection, request_id: int, pending: _Pending) -> None:
        await self._send_cancel(c, request_id)
        with contextlib.suppress(TimeoutError, ExecError):
            await asyncio.wait_for(asyncio.shield(pending.future), self.stop_timeout)

    async def exec(
        self,
        command: str,
        *,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        cancel: asyncio.Event | None = None,
        capture: CaptureOptions | None = None,
        on_update: UpdateConsumer | None = None,
        yield_after: float | None = None,
        tty: bool = False,
    ) -> ShellExecResult:
        """Run ``command`` on the exec host; see ``LocalExecEnv.exec``.

        With ``yield_after``, a command still running then goes on in the background
        on the exec host (``self.background``); its later output stays there until read.

        The timeout is enforced there (it is the command's clock, not the network's).
        Raises ``TransportError`` (with ``partial``, the view so far) when the
        connection drops mid-command; the updates already delivered to ``on_update``
        are that partial output.
        """
        if not isinstance(command, str):
            raise ExecConfigError(f"exec command must be a str, got {type(command).__name__}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ExecConfigError(
                f"exec timeout must be a number of seconds > 0 or None, got {timeout!r}"
            )
        tracer = _otel.tracer()
        if tracer is not None:
            return await traced_exec(
                tracer,
                "remote",
                self._exec(
                    command, cwd, env, timeout, cancel, capture, on_update, yield_after, tty
                ),
            )
        return await self._exec(
            command, cwd, env, timeout, cancel, capture, on_update, yield_after, tty
        )

    async def _exec(
        self,
        command: str,
        cwd: Path | str | None,
        env: Mapping[str, str] | None,
        timeout: float | None,
        cancel: asyncio.Event | None,
        capture: CaptureOptions | None,
        on_update: UpdateConsumer | None,
        yield_after: float | None,
        tty: bool,
    ) -> ShellExecResult:
        options = capture if capture is not None else CaptureOptions()
        pending = _Pending(what=repr(command[:80]), on_update=on_update)
        message = await self._request(
            {
                "op": "exec",
                "command": command,
                "cwd": str(cwd) if cwd is not None else None,
                "env": dict(env) if env is not None else None,
                "timeout": timeout,
                "capture": capture_to_dict(options),
                "spill_dir": self.spill_dir,
                "yield_after": yield_after,
                "tty": bool(tty),
            },
            pending,
            cancel,
        )
        if pending.callback_error is not None:
            raise pending.callback_error
        if message["op"] == "error":
            raise error_from_dict(message, self.transport.describe())
        return result_from_dict(message.get("result"))

    async def _bg_request(
        self, fn: str, args: dict[str, Any], on_update: UpdateConsumer | None = None
    ) -> Any:
        pending = _Pending(what=f"the background operation {fn}", on_update=on_update)
        message = await self._request({"op": "bg", "fn": fn, "args": args}, pending, None)
        if message["op"] == "error":
            raise error_from_dict(message, self.transport.describe())
        return message.get("result")

    async def call(
        self, fn: str, args: Mapping[str, Any], *, cancel: asyncio.Event | None = None
    ) -> dict[str, Any]:
        """Run the file operation ``fn`` on the exec host; its JSON result.

        Raises ``ExecError`` with the host's message when the operation failed there
        (a missing file, a bad argument), ``TransportError`` when the connection did.
        """
        pending = _Pending(what=f"the file operation {fn}")
        message = await self._request({"op": "call", "fn": fn, "args": dict(args)}, pending, cancel)
        if message["op"] == "error":
            raise ExecError(f"{message.get('message')} (on {self.transport.describe()})")
        result = message.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(f"malformed result of {fn} from the exec host: {result!r:.200}")
        return result
