"""Starting a command's shell, and learning that it exited, without a thread per command.

asyncio's ``loop.subprocess_exec`` on CPython 3.11 watches each child with a thread of
its own (``ThreadedChildWatcher``): every command starts a thread, waits for it to be
running, and has that thread wake the loop when ``waitpid`` returns. For a command that
ends at once (``true``, ``git status``) that is most of what the start costs beyond the
fork, and under load each hand-over waits for the scheduler. Where Linux has
``pidfd_open`` (5.3+) the shell is started here instead, the same way asyncio starts it
(``subprocess.Popen``, in the loop's thread), and its exit is a readable pidfd on the
loop's own selector: one ``waitpid`` when it fires, no thread. Elsewhere asyncio's path
is used unchanged.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio


class ExitProtocol(Protocol):
    """What is told of the exit (``ExecProtocol`` in ``_child_protocol``)."""

    def process_exited(self) -> None: ...


class ChildProcess(Protocol):
    """The part of asyncio's ``SubprocessTransport`` ``LocalExecEnv`` uses."""

    def get_pid(self) -> int: ...
    def get_returncode(self) -> int | None: ...
    def close(self) -> None: ...


_pidfd: bool | None = None


def pidfd_supported() -> bool:
    """Whether this kernel and Python can watch a process through a pidfd (asked once)."""
    global _pidfd
    if _pidfd is None:
        try:
            os.close(os.pidfd_open(os.getpid()))
            _pidfd = True
        except (AttributeError, OSError):
            _pidfd = False
    return _pidfd


class PidfdChild:
    """A started child whose exit the loop learns from its pidfd becoming readable.

    The one ``waitpid`` of this pid is ours (asyncio does not know the process); other
    reaping in this process only ever waits for specific other pids (``_reaper``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        popen: subprocess.Popen[bytes],
        protocol: ExitProtocol,
    ) -> None:
        self._loop = loop
        self._popen = popen
        self._protocol = protocol
        self._pid = popen.pid
        self._returncode: int | None = None
        self._pidfd: int | None = os.pidfd_open(self._pid)
        loop.add_reader(self._pidfd, self._on_ready)

    def get_pid(self) -> int:
        return self._pid

    def get_returncode(self) -> int | None:
        return self._returncode

    def _on_ready(self) -> None:
        try:
            pid, status = os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:
            # Reaped by something else in this process: the status is lost. asyncio's
            # watchers report 255 in that case; so does this.
            pid, code = self._pid, 255
        else:
            if pid == 0:  # pragma: no cover - a pidfd is readable only once it exited
                return
            code = os.waitstatus_to_exitcode(status)
        self._returncode = self._popen.returncode = code
        self._unwatch()
        self._protocol.process_exited()

    def _unwatch(self) -> None:
        fd, self._pidfd = self._pidfd, None
        if fd is not None:
            self._loop.remove_reader(fd)
            os.close(fd)

    def close(self) -> None:
        """As asyncio's transport: a child still running is killed (the group was
        already signalled by the teardown); the watcher stays to reap it."""
        if self._returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self._pid, signal.SIGKILL)


async def start_child(
    loop: asyncio.AbstractEventLoop,
    protocol: asyncio.SubprocessProtocol,
    argv: Sequence[str],
    *,
    stdin: int,
    stdout: int,
    stderr: int,
    cwd: Path | str | None,
    env: Mapping[str, str] | Mapping[bytes, bytes],
    preexec_fn: Callable[[], None] | None,
) -> ChildProcess:
    """Start ``argv`` in a new session with the given descriptors as its 0, 1 and 2;
    ``protocol.process_exited()`` is called when it exits. Raises ``OSError`` when it
    cannot start (no such shell, a missing ``cwd``)."""
    if pidfd_supported():
        return start_pidfd_child(
            loop,
            protocol,
            argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            preexec_fn=preexec_fn,
        )
    transport, _ = await loop.subprocess_exec(
        lambda: protocol,
        *argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
    return transport


def start_pidfd_child(
    loop: asyncio.AbstractEventLoop,
    protocol: ExitProtocol,
    argv: Sequence[str],
    *,
    stdin: int,
    stdout: int,
    stderr: int,
    cwd: Path | str | None,
    env: Mapping[str, str] | Mapping[bytes, bytes],
    preexec_fn: Callable[[], None] | None,
) -> PidfdChild:
    """:func:`start_child` where :func:`pidfd_supported`: started at once, in the
    caller's step of the loop (nothing is awaited, so nothing can interrupt the start
    half-way)."""
    popen = subprocess.Popen(
        list(argv),
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        start_new_session=True,
        preexec_fn=preexec_fn,
    )
    try:
        return PidfdChild(loop, popen, protocol)
    except BaseException:  # pragma: no cover - pidfd_open worked for this process already
        popen.kill()
        popen.wait()
        raise


async def kill_and_reap(pids: Sequence[int], timeout: float) -> None:
    """SIGKILL each of ``pids`` (children of ours) and reap it once it has exited,
    waiting at most ``timeout`` seconds: on pidfds on the loop where Linux has them
    (the signal goes through the pidfd, so a reused pid is never hit), otherwise with a
    blocking ``waitpid`` in a thread."""
    if not pids:
        return
    import asyncio

    if not pidfd_supported():
        await asyncio.wait_for(asyncio.to_thread(_kill_and_wait, pids), timeout)
        return
    loop = asyncio.get_running_loop()
    watched: list[tuple[int, int, asyncio.Future[None]]] = []
    try:
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                continue  # gone and reaped already
            exited: asyncio.Future[None] = loop.create_future()
            watched.append((pid, fd, exited))
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            loop.add_reader(fd, _settle, exited)
        if watched:
            await asyncio.wait([f for _, _, f in watched], timeout=timeout)
    finally:
        for pid, fd, _ in watched:
            loop.remove_reader(fd)
            os.close(fd)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _kill_and_wait(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


__all__ = ["ChildProcess", "PidfdChild", "kill_and_reap", "pidfd_supported", "start_child"]
