"""``auth_forwarder.py`` that also restarts its server after each task it creates.

It starts the server itself (``SERVER...``, a ``toolfold mcp --http`` on
UPSTREAM_PORT, in its own process group) and forwards to it with the bearer token
added. Once it has relayed the answer to a ``tools/call`` that created a task
(``resultType: "task"``), the next request first kills the server's process group
with SIGKILL, starts the same command again (same port, store, ``--session`` and
token) and waits until the new server listens; then it is passed on: the client's next
``tasks/get`` reaches the new server, as it would behind a supervisor that restarts
a crashed service on its port.

Each restart appends the task's id to ``DIR/restarts``; the servers' stderr goes to
``DIR/server.err`` and the running server's pid to ``DIR/server.pid``.

    python restart_forwarder.py LISTEN_PORT DIR SERVER...   (token in $TOOLFOLD_TOKEN)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import BinaryIO

import httpx
import uvicorn
from auth_forwarder import (
    Receive,
    Scope,
    Send,
    lifespan,
    request_body,
    start_response,
    stream_response,
    upstream_request,
)

CREATED_TASK = re.compile(rb'"resultType"\s*:\s*"task"')
TASK_ID = re.compile(rb'"taskId"\s*:\s*"([^"]+)"')
LISTENING = b"toolfold: MCP (Streamable HTTP) at http://127.0.0.1:"


class Backend:
    """The server behind the forwarder, started (and restarted) from one command line."""

    def __init__(self, command: list[str], port: int, logs: Path) -> None:
        self.command = command
        self.port = port
        self.logs = logs
        self.proc: asyncio.subprocess.Process | None = None
        self.pending: str | None = None  # the task whose creation asks for a restart
        self.lock = asyncio.Lock()
        self.client = httpx.AsyncClient(timeout=None)
        self._stderr: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the server; return once it listens (it says so on stderr after
        binding its socket)."""
        proc = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self.proc = proc
        (self.logs / "server.pid").write_text(f"{proc.pid}\n")
        assert proc.stderr is not None
        err = (self.logs / "server.err").open("ab")
        while True:
            line = await proc.stderr.readline()
            err.write(line)
            err.flush()
            if not line:
                err.close()
                raise RuntimeError(f"the server exited before listening: {self.logs}/server.err")
            if line.startswith(LISTENING):
                break
        self._stderr = asyncio.ensure_future(self._copy(proc.stderr, err))

    @staticmethod
    async def _copy(stream: asyncio.StreamReader, err: BinaryIO) -> None:
        with err:
            while line := await stream.readline():
                err.write(line)
                err.flush()

    async def kill(self) -> None:
        """SIGKILL the server's process group and reap it."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        if self._stderr is not None:
            await self._stderr

    async def settle(self) -> None:
        """Restart the server if a task was created since the last request."""
        async with self.lock:
            if self.pending is not None:
                await self.restart(self.pending)
                self.pending = None

    async def restart(self, task_id: str) -> None:
        await self.kill()
        # The pooled connections went with the server: a client reconnects.
        await self.client.aclose()
        self.client = httpx.AsyncClient(timeout=None)
        with (self.logs / "restarts").open("a") as restarts:
            restarts.write(f"{task_id}\n")
        await self.start()


def is_tool_call(body: bytes) -> bool:
    with contextlib.suppress(ValueError):
        message = json.loads(body)
        return isinstance(message, dict) and message.get("method") == "tools/call"
    return False


def restarting_forwarder(backend: Backend, token: str, listen: int) -> uvicorn.Server:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await lifespan(scope, receive, send)
            return
        body = await request_body(receive)
        if body is None:
            return
        await backend.settle()  # before the request after a task's creation
        client = backend.client
        request = upstream_request(client, scope, body, backend.port, token)
        response = await client.send(request, stream=True)
        if not is_tool_call(body):
            await stream_response(send, response)
            return
        # A call's answer is read whole (it ends with the call's result or its task)
        # so that a created task is known before the client can send its next request.
        try:
            answer = await response.aread()
        finally:
            await response.aclose()
        created = CREATED_TASK.search(answer) and TASK_ID.search(answer)
        if created:
            backend.pending = created.group(1).decode()
        await start_response(send, response)
        await send({"type": "http.response.body", "body": answer})

    config = uvicorn.Config(app, host="127.0.0.1", port=listen, log_level="warning", lifespan="off")
    return uvicorn.Server(config)


async def main(backend: Backend, token: str, listen: int) -> None:
    server = restarting_forwarder(backend, token, listen)
    # uvicorn would re-raise SIGTERM once it stopped, ending this process before the
    # server behind it is killed.
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]

    def stop() -> None:
        server.should_exit = True

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)
    try:
        await backend.start()
        await server.serve()
    finally:
        await backend.kill()


if __name__ == "__main__":
    listen, logs, command = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
    port = int(command[command.index("--port") + 1])
    asyncio.run(main(Backend(command, port, logs), os.environ["TOOLFOLD_TOKEN"], listen))
