"""One upstream MCP server for the proxy: started on first use, restarted after a crash.

The SDK's client transports are async context managers that must be entered and
left in one task, so one background task owns each connection for its lifetime;
calls use the ``ClientSession`` it publishes. When the upstream dies, that task
ends and ``dead`` is set: calls in flight fail at once with the upstream's exit
status and stderr tail, and the next call starts a new upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import mcp_types as types
from mcp.client._probe import negotiate_auto
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from toolfold._fsperm import open_private_dir, open_private_file

from ._capped_stdio import Exit, Gate, capped_stdio_client
from ._errors import McpHostError
from ._message_cap import DEFAULT_MAX_MESSAGE_BYTES

T = TypeVar("T")

STDERR_TAIL = 2000
"""Characters of the upstream's stderr quoted in an error result."""

START_TIMEOUT = 60.0
"""Seconds an upstream gets to answer ``initialize``."""


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _remove_if_empty(log: Path, made: os.stat_result) -> None:
    """Remove the stderr log this connection created if its upstream wrote nothing
    there (and it is still that file): a client that only listed tools leaves none."""
    try:
        now = os.lstat(log)
        if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino) and now.st_size == 0:
            os.unlink(log)
    except OSError:
        pass


class UpstreamError(McpHostError):
    """The upstream server could not be started, or died."""


class Stopped(Exception):
    """``Upstream.call`` gave up on a call because its ``stop`` came first (the client
    cancelled it); the upstream was told (``notifications/cancelled``)."""


class _Ended(asyncio.Event):
    """A connection's end: an event, and (``future``) a future that ``asyncio.wait``
    takes as it is, so a call watches the connection without a task of its own."""

    _future: asyncio.Future[None] | None = None

    def set(self) -> None:
        super().set()
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    def future(self) -> asyncio.Future[None]:
        if self._future is None:
            self._future = asyncio.get_running_loop().create_future()
            if self.is_set():
                self._future.set_result(None)
        return self._future


@dataclass(frozen=True)
class UpstreamSpec:
    """Where the upstream is: a command run over stdio, or a Streamable HTTP URL."""

    command: tuple[str, ...] = ()
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest upstream message read, over stdio or HTTP (see ``_message_cap``)."""
    timeout: float | None = None
    """Seconds a request may go unanswered before the upstream counts as hung."""

    def describe(self) -> str:
        """How messages name the upstream."""
        return f"upstream {self.url}" if self.url else f"upstream `{shlex.join(self.command)}`"


class Upstream:
    """The connection to one upstream server (see the module docstring)."""

    def __init__(
        self, spec: UpstreamSpec, stderr_path: Path, callbacks: dict[str, Any] | None = None
    ) -> None:
        if not spec.command and not spec.url:
            raise UpstreamError("no upstream: give a command after -- or --upstream-url URL")
        self.spec = spec
        self.stderr_path = stderr_path
        self.callbacks = dict(callbacks or {})
        """``ClientSession`` callbacks (sampling, logging) the upstream's requests reach."""
        self.gate: Gate | None = None
        """Awaited before each read of a stdio upstream (the proxy's client stalled)."""
        self.on_start: list[Callable[[ClientSession], Awaitable[None]]] = []
        """Run on each new session before any call uses it (a restart restores state)."""
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self.dead = _Ended()
        self.dead.set()
        self._lock = asyncio.Lock()
        self._ended = Exit()
        self.starts = 0
        """How many times the upstream was started (a restart counts again)."""
        self.modern = False
        """Try 2026-07-28 (``server/discover``) first, falling back to ``initialize``
        for an upstream that does not know it; else ``initialize`` only."""

    async def session(self) -> ClientSession:
        """The live session, starting the upstream if it is not running."""
        async with self._lock:
            exited = self._ended.returncode is not None  # while no call was waiting on it
            if self._session is not None and not self.dead.is_set() and not exited:
                return self._session
            self._stop.set()  # the last connection's owner, if any, tears it down
            loop = asyncio.get_running_loop()
            ready: asyncio.Future[ClientSession] = loop.create_future()
            self.dead = _Ended()
            self._stop = asyncio.Event()
            self.starts += 1
            self._task = asyncio.create_task(
                self._own(ready, self.dead, self._stop), name="mcp upstream"
            )
            try:
                return await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT)
            except TimeoutError:
                self._stop.set()
                raise UpstreamError(
                    f"{self.spec.describe()} did not answer initialize within "
                    f"{START_TIMEOUT:g} s{self.stderr_tail()}"
                ) from None

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ClientSession]:
        if self.spec.url:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            from ._capped_http import CappedTransport

            transport = CappedTransport(
                httpx2.AsyncHTTPTransport(), self.spec.max_message_bytes, self.spec.describe()
            )
            async with (
                # No read timeout: a hang is --upstream-timeout's to judge, as over stdio.
                httpx2.AsyncClient(
                    headers=self.spec.headers,
                    transport=transport,
                    timeout=httpx2.Timeout(30.0, read=None),
                ) as http,
                # The transport bounds every event to the cap; the SDK's own fixed
                # 1 MiB bound would fail bigger results as a lost connection.
                streamable_http_client(
                    self.spec.url, http_client=http, max_sse_event_size=None
                ) as (r, w),
                ClientSession(r, w, **self.callbacks) as session,
            ):
                yield session
            return
        # The upstream's stderr is quoted in errors and stored: never appended to a file
        # someone planted (a link to theirs, or theirs outright).
        log = self.stderr_path
        os.close(open_private_dir(log.parent.parent, log.parent.name))
        existed = os.path.lexists(log)
        fd = open_private_file(log, os.O_WRONLY | os.O_APPEND)
        made = None if existed else os.fstat(fd)
        self._ended = Exit()
        try:
            with os.fdopen(fd, "w") as errlog:
                async with (
                    capped_stdio_client(
                        list(self.spec.command),
                        errlog=errlog,
                        cap=self.spec.max_message_bytes,
                        who=self.spec.describe(),
                        ended=self._ended,
                        gate=self.gate,
                    ) as (r, w),
                    ClientSession(r, w, **self.callbacks) as session,
                ):
                    yield session
        finally:
            if made is not None:
                _remove_if_empty(log, made)

    async def _own(
        self, ready: asyncio.Future[ClientSession], dead: asyncio.Event, stop: asyncio.Event
    ) -> None:
        # `dead` and `stop` are this connection's own: after a crash a new connection
        # may start while this one is still being torn down.
        session: ClientSession | None = None
        try:
            async with self._connect() as session:
                if self.modern:
                    await negotiate_auto(session)
                else:
                    await session.initialize()
                for hook in self.on_start:
                    await hook(session)
                self._session = session
                ready.set_result(session)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ended = "" if self._ended.returncode is None else f" ({self.how(self._ended)})"
                ready.set_exception(
                    UpstreamError(
                        f"{self.spec.describe()} could not start{ended}: {exc}{self.stderr_tail()}"
                    )
                )
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._session is session:
                self._session = None
            dead.set()

    def how(self, ended: Exit) -> str:
        """How a connection ended: the process's exit status over stdio."""
        return "closed the connection" if self.spec.url else ended.describe()

    def stderr_tail(self) -> str:
        """``; its stderr ended with: ...`` (empty when it wrote nothing)."""
        try:
            fd = os.open(self.stderr_path, os.O_RDONLY | _NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                if os.fstat(f.fileno()).st_uid not in (os.geteuid(), 0):
                    return ""  # not the log we write: quote nothing someone else wrote
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - STDERR_TAIL))
                tail = f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f"; its stderr ended with: {tail}" if tail else ""

    async def call(
        self,
        coro_factory: Callable[[ClientSession], Awaitable[T]],
        stop: asyncio.Future[Any] | None = None,
    ) -> T:
        """Run ``await coro_factory(session)``; if the upstream dies first, raise
        ``UpstreamError`` naming it, its exit status and its stderr tail. If ``stop``
        is done first, the call is cancelled (the SDK tells the upstream) and
        ``Stopped`` is raised."""
        session = await self.session()
        dead, stop_connection, ended = self.dead, self._stop, self._ended
        call = asyncio.ensure_future(coro_factory(session))
        # The connection's end as a future, not a task waiting on the event: one task
        # (and its loop turns) fewer per call.
        waits: set[asyncio.Future[Any]] = {call, dead.future()}
        if stop is not None:
            waits.add(stop)
        try:
            await asyncio.wait(
                waits, timeout=self.spec.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            call.cancel()
            raise
        if not call.done() and stop is not None and stop.done() and not dead.is_set():
            call.cancel()
            raise Stopped
        if not call.done():
            hung = not dead.is_set()
            if self._session is session:
                self._session = None
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            if hung:
                # No answer and no exit: stop this upstream; the next call starts another.
                stop_connection.set()
                raise UpstreamError(
                    f"{self.spec.describe()} did not answer within {self.spec.timeout:g} s "
                    f"(--upstream-timeout); it was stopped and restarts on the next call"
                    f"{self.stderr_tail()}"
                )
            raise UpstreamError(
                f"{self.spec.describe()} {self.how(ended)} during the call{self.stderr_tail()}"
            )
        exc = call.exception()
        # -32000 is also what an upstream may answer with itself: over stdio the
        # transport saw the stream end or it did not. Over HTTP the SDK's transport
        # gives a lost stream that code too, so there it always means reconnect.
        closed = (
            isinstance(exc, MCPError)
            and exc.code == types.CONNECTION_CLOSED
            and (bool(self.spec.url) or ended.closed)
        )
        if exc is not None and (closed or dead.is_set()):
            # Forget this connection now (its teardown may still be running), so the
            # next call starts a new upstream.
            dead.set()
            if self._session is session:
                self._session = None
            said = ""
            if isinstance(exc, MCPError) and exc.message != "Connection closed":
                said = f" (error {exc.code}: {exc.message})"
            raise UpstreamError(
                f"{self.spec.describe()} {self.how(ended)} during the call{said}"
                f"{self.stderr_tail()}"
            ) from exc
        return call.result()

    async def aclose(self) -> None:
        """Stop the upstream (if running) and wait for its task."""
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 10)


__all__ = ["Stopped", "Upstream", "UpstreamError", "UpstreamSpec"]
