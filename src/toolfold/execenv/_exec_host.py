"""``toolfold exec-host``: runs commands for a ``RemoteExecEnv`` on this machine.

It speaks JSON lines (``_protocol``) on stdin/stdout. Every command runs through a
``LocalExecEnv``, so capture, window, spill and teardown are exactly the local ones,
and only its paced, bounded updates are written out: a gigabyte of output stays here
(in the spill file) and never crosses the transport. File operations (``call``) run
in worker threads. When stdin closes — the client went away, the ssh connection
dropped, ``docker exec`` was killed — every running command is cancelled (its process
group killed by the same teardown) and the host exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
import threading
from pathlib import Path
from typing import Any

from ._background import BackgroundCommands, BackgroundRead
from ._errors import CallbackError, ExecConfigError, ExecError
from ._fileops import FILE_OPS, READ_CHECK, FileOpError, op_error_text
from ._hostguard import HostGuard
from ._local import LocalExecEnv
from ._protocol import (
    MAX_LINE_BYTES,
    PROTOCOL_VERSION,
    bg_read_to_dict,
    capture_from_dict,
    decode,
    encode,
    error_to_dict,
    result_to_dict,
)
from ._sandbox import Sandbox
from ._updates import ShellOutputUpdate, update_to_dict

DEFAULT_SPILL_DIR = "~/.toolfold/spill"
"""Where spill files go on the exec host unless a request names a directory."""


def _toolfold_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolfold")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


class _Output:
    """The protocol stream: whole lines, written one at a time, with backpressure."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            if self.writer.is_closing():
                raise ConnectionError("the exec host's output is closed (client gone)")
            self.writer.write(encode(message))
            # Waiting here is what slows the publisher down when the transport is slow:
            # only the latest bounded state exists, never a queue of updates.
            await self.writer.drain()


class ExecHost:
    """One client connection: dispatches requests until stdin closes."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        output: _Output,
        *,
        spill_dir: str = DEFAULT_SPILL_DIR,
        kill_grace: float = 2.0,
        exit_grace: float = 1.0,
        sandbox: Sandbox | None = None,
    ) -> None:
        self.reader = reader
        self.sandbox = sandbox
        self.output = output
        self.spill_dir = spill_dir
        self.kill_grace = kill_grace
        self.exit_grace = exit_grace
        self.cancels: dict[int, asyncio.Event | threading.Event] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.followers: set[asyncio.Task[None]] = set()
        # The commands left running in the background by this client's execs; stopped
        # when its connection closes.
        self.background = BackgroundCommands(kill_grace=kill_grace)
        # Kills what this host started if it dies without its teardown (kill -9).
        self.guard = HostGuard()

    async def hello(self) -> dict[str, Any]:
        return {
            "op": "hello",
            "protocol": PROTOCOL_VERSION,
            "toolfold": _toolfold_version(),
            "pid": os.getpid(),
            "python": sys.executable,
            "cwd": os.getcwd(),
            "spill_dir": str(Path(self.spill_dir).expanduser()),
            # The profile this host confines its commands with (None: unconfined). No
            # protocol bump: clients read the hello's fields by name and ignore the rest.
            "sandbox": self.sandbox.profile if self.sandbox is not None else None,
        }

    async def serve(self) -> int:
        """Run until stdin closes; returns the process exit status."""
        await self.output.send(await self.hello())
        try:
            first = await self._read()
            if first is None:
                return 0
            if first.get("op") != "hello" or first.get("protocol") != PROTOCOL_VERSION:
                refusal = (
                    f"this exec host speaks protocol version {PROTOCOL_VERSION} "
                    f"(toolfold {_toolfold_version()}); the client sent {first.get('protocol')!r} "
                    f"in {first.get('op')!r}; install the same toolfold version on both sides"
                )
                await self.output.send(
                    {"op": "error", "id": 0, "kind": "ProtocolError", "message": refusal}
                )
                print(f"toolfold exec-host: {refusal}", file=sys.stderr)
                return 2
            while (message := await self._read()) is not None:
                self._dispatch(message)
        finally:
            await self._stop_all()
            self.guard.close()
        return 0

    async def _read(self) -> dict[str, Any] | None:
        try:
            line = await self.reader.readline()
        except (ValueError, asyncio.LimitOverrunError):
            print(
                f"toolfold exec-host: a request longer than {MAX_LINE_BYTES} bytes; closing",
                file=sys.stderr,
            )
            return None
        except ConnectionError:
            return None
        if not line:
            return None
        try:
            return decode(line)
        except ExecError as exc:
            print(f"toolfold exec-host: {exc}; closing", file=sys.stderr)
            return None

    def _dispatch(self, message: dict[str, Any]) -> None:
        op = message["op"]
        request_id = message.get("id")
        if op == "cancel":
            event = self.cancels.get(request_id) if isinstance(request_id, int) else None
            if event is not None:
                event.set()
            return
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            print(
                f"toolfold exec-host: request without an integer id: {message!r:.200}",
                file=sys.stderr,
            )
            return
        # The cancel event is registered now, not when the task first runs: a cancel
        # read right after its request must find it.
        if op == "exec":
            exec_cancel = asyncio.Event()
            self.cancels[request_id] = exec_cancel
            job = self._exec(request_id, message, exec_cancel)
        elif op == "call":
            call_cancel = threading.Event()
            self.cancels[request_id] = call_cancel
            job = self._call(request_id, message, call_cancel)
        elif op == "bg":
            job = self._bg(request_id, message)
        else:
            job = self._refuse(
                request_id, f"unknown request op {op!r}; expected exec, call, bg or cancel"
            )
        task = asyncio.ensure_future(job)
        # A follow lasts as long as its command: it ends when the commands are stopped.
        tasks = self.followers if op == "bg" and message.get("fn") == "follow" else self.tasks
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _refuse(self, request_id: int, message: str) -> None:
        with contextlib.suppress(ConnectionError):
            await self.output.send(
                {"op": "error", "id": request_id, "kind": "ExecConfigError", "message": message}
            )

    async def _exec(self, request_id: int, message: dict[str, Any], cancel: asyncio.Event) -> None:

        async def on_update(update: ShellOutputUpdate) -> None:
            # A failed send raises into the publisher: LocalExecEnv kills the command
            # (CallbackError) — a command whose output has nowhere to go is not left running.
            await self.output.send(
                {"op": "update", "id": request_id, "update": update_to_dict(update)}
            )

        try:
            command = message.get("command")
            if not isinstance(command, str):
                raise ExecConfigError(f"exec 'command' must be a string, got {command!r}")
            env = message.get("env")
            if env is not None and not (
                isinstance(env, dict) and all(isinstance(v, str) for v in env.values())
            ):
                raise ExecConfigError("exec 'env' must be an object of strings or null")
            self.guard.start()
            env = self.guard.child_env(env)
            # A relative spill_dir (the CLI sends the session name) is under --spill-dir;
            # an absolute or ~ one is used as given.
            spill_dir = Path(self.spill_dir).expanduser()
            requested = message.get("spill_dir")
            if isinstance(requested, str) and requested:
                spill_dir = spill_dir / Path(requested).expanduser()
            local = LocalExecEnv(
                spill_dir,
                kill_grace=self.kill_grace,
                exit_grace=self.exit_grace,
                background=self.background,
                sandbox=self.sandbox,
            )
            cwd = message.get("cwd")
            result = await local.exec(
                command,
                cwd=Path(cwd).expanduser() if isinstance(cwd, str) else None,
                env=env,
                timeout=message.get("timeout"),
                cancel=cancel,
                capture=capture_from_dict(message.get("capture")),
                on_update=on_update,
                yield_after=message.get("yield_after"),
                tty=message.get("tty") is True,
            )
            reply: dict[str, Any] = {
                "op": "result",
                "id": request_id,
                "result": result_to_dict(result),
            }
        except CallbackError:
            return  # the client is gone: nobody to tell
        except ExecError as exc:
            reply = error_to_dict(request_id, exc)
        except Exception as exc:  # every request gets an answer, or its caller waits forever
            reply = error_to_dict(request_id, ExecError(f"{type(exc).__name__}: {exc}"))
        finally:
            self.cancels.pop(request_id, None)
        with contextlib.suppress(ConnectionError):
            await self.output.send(reply)

    async def _call(
        self, request_id: int, message: dict[str, Any], cancel: threading.Event
    ) -> None:
        fn = FILE_OPS.get(str(message.get("fn")))
        args = message.get("args")
        try:
            if fn is None:
                raise FileOpError(
                    f"unknown file operation {message.get('fn')!r}; expected one of {sorted(FILE_OPS)}"
                )
            if not isinstance(args, dict):
                raise FileOpError(f"'args' must be an object, got {args!r}")
            cwd = args.get("cwd")
            check = (
                self.sandbox.read_check(
                    cwd=cwd if isinstance(cwd, str) and cwd else os.getcwd(),
                    allow=[Path(self.spill_dir).expanduser()],
                )
                if self.sandbox is not None
                else None
            )
            token = READ_CHECK.set(check)  # to_thread carries it into the worker
            try:
                result = await asyncio.to_thread(fn, args, cancel)
            finally:
                READ_CHECK.reset(token)
            reply: dict[str, Any] = {"op": "result", "id": request_id, "result": result}
        except Exception as exc:  # every request gets an answer, or its caller waits forever
            text = op_error_text(exc)
            reply = {"op": "error", "id": request_id, "kind": type(exc).__name__, "message": text}
        finally:
            self.cancels.pop(request_id, None)
        with contextlib.suppress(ConnectionError):
            await self.output.send(reply)

    async def _bg(self, request_id: int, message: dict[str, Any]) -> None:
        fn, args = message.get("fn"), message.get("args")
        try:
            if not isinstance(args, dict):
                raise ExecConfigError(f"bg 'args' must be an object, got {args!r:.100}")
            bg = self.background
            result: Any
            if fn == "read":
                result = await bg.read(args["handle"], wait=args["wait"], until=args["until"])
            elif fn == "write":
                result = await bg.write(
                    args["handle"],
                    args["data"],
                    eof=args["eof"] is True,
                    wait=args["wait"],
                    until=args["until"],
                )
            elif fn == "signal":
                result = await bg.signal(
                    args["handle"], args["signal"], wait=args["wait"], until=args["until"]
                )
            elif fn == "stop":
                result = await bg.stop(args["handle"])
            elif fn == "follow":
                result = await self._follow(request_id, bg, args)
            elif fn == "list":
                result = [dataclasses.asdict(info) for info in bg.commands()]
            elif fn == "resize":
                bg.resize(args["handle"], args["columns"], args["rows"])
                result = None
            else:
                raise ExecConfigError(
                    f"unknown bg operation {fn!r}; expected read, write, signal, stop, follow, "
                    "list or resize"
                )
            if isinstance(result, BackgroundRead):
                result = bg_read_to_dict(result)
            reply: dict[str, Any] = {"op": "result", "id": request_id, "result": result}
        except KeyError as exc:
            reply = error_to_dict(
                request_id, ExecConfigError(f"bg {fn!r} lacks the argument {exc.args[0]!r}")
            )
        except ExecError as exc:
            reply = error_to_dict(request_id, exc)
        except Exception as exc:  # every request gets an answer
            reply = error_to_dict(request_id, ExecError(f"{type(exc).__name__}: {exc}"))
        with contextlib.suppress(ConnectionError):
            await self.output.send(reply)

    async def _follow(
        self, request_id: int, bg: BackgroundCommands, args: dict[str, Any]
    ) -> dict[str, Any]:
        """Send a background command's paced updates as ``update`` messages of this
        request until it ends; its end (a ``BackgroundInfo``) is the result. A send that
        fails (the client is gone) stops the command, as for ``exec``."""
        tag = args.get("tag")
        run = bg.follow(args["handle"], tag=tag if isinstance(tag, str) else None)

        async def on_update(update: ShellOutputUpdate) -> None:
            await self.output.send(
                {"op": "update", "id": request_id, "update": update_to_dict(update)}
            )

        return dataclasses.asdict(await run(on_update))

    async def _stop_all(self) -> None:
        # stdin closed: nobody will read results. Cancel every command (their process
        # groups are killed by LocalExecEnv's teardown) and wait for the teardowns; the
        # commands left in the background are stopped the same way.
        for event in list(self.cancels.values()):
            event.set()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        for read in await self.background.aclose():
            print(
                f"toolfold exec-host: stopped background command {read.handle} "
                f"({read.command[:80]!r}): the client went away",
                file=sys.stderr,
            )
        if self.followers:  # they end with their commands, just stopped
            await asyncio.gather(*self.followers, return_exceptions=True)


async def _open_stdio() -> tuple[asyncio.StreamReader, _Output]:
    loop = asyncio.get_running_loop()
    # The protocol gets its own duplicate of fd 1; fd 1 itself then points at stderr, so
    # a stray print (from us or a library) cannot corrupt the message stream.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", buffering=0, closefd=False)
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, _Output(writer)


async def _main(
    spill_dir: str, kill_grace: float, exit_grace: float, sandbox: Sandbox | None
) -> int:
    reader, output = await _open_stdio()
    host = ExecHost(
        reader,
        output,
        spill_dir=spill_dir,
        kill_grace=kill_grace,
        exit_grace=exit_grace,
        sandbox=sandbox,
    )
    try:
        return await host.serve()
    except ConnectionError:
        return 0  # the client went away before the hello could be sent


def run_exec_host(
    spill_dir: str = DEFAULT_SPILL_DIR,
    *,
    kill_grace: float = 2.0,
    exit_grace: float = 1.0,
    sandbox: Sandbox | None = None,
) -> int:
    """Serve one client on stdin/stdout until stdin closes; returns the exit status.
    ``sandbox`` confines every command (the spill directories are hidden from them)."""
    import signal

    # SIGHUP / SIGTERM (a dropped terminal, `docker stop`) end the host like a closed
    # stdin would: by cancelling, so the commands' groups are killed, not orphaned.
    async def main() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(_main(spill_dir, kill_grace, exit_grace, sandbox))
        for signum in (signal.SIGHUP, signal.SIGTERM):
            loop.add_signal_handler(signum, task.cancel)
        try:
            return await task
        except asyncio.CancelledError:
            return 1

    return asyncio.run(main())
