"""Run shell commands locally with bounded capture, spill files and paced updates."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolfold import _otel
from toolfold._aio import drop_event_future, event_future

from . import _spawn
from ._child import Streams, has_exited
from ._child import default_shell as _default_shell
from ._child_protocol import ExecProtocol
from ._errors import ExecConfigError, ExecError, ExecStartError
from ._exec_result import ShellExecResult, running_result
from ._limits import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_RUNNING,
    CaptureOptions,
    check_background_limits,
)
from ._output_view import ShellOutputView
from ._pipes import PipeReader
from ._reaper import (
    DEFAULT_EXIT_GRACE,
    DEFAULT_KILL_GRACE,
    EXEC_ID_VAR,
    become_subreaper,
    below_children,
    command_processes,
    ended_sandbox_inits,
    kill_command,
    new_exec_id,
    reap_exited,
    reap_killed,
    signal_all,
    terminate_command,
)
from ._session import CaptureSession
from ._spill import open_spill_dir

if TYPE_CHECKING:
    from ._background import BackgroundCommands, BackgroundRead
    from ._sandbox import Sandbox
    from ._session import UpdateConsumer


def _controlling_terminal() -> Callable[[], None]:
    # The terminal's module (and termios) only for a command that runs on one.
    from ._pty import take_controlling_terminal

    return take_controlling_terminal


_EXEC_ID_KEY = os.fsencode(EXEC_ID_VAR)


def _environ_bytes() -> dict[bytes, bytes]:
    """A copy of this process's environment in bytes, as exec gets it: on POSIX the
    store behind ``os.environ`` already is that (copied in one C call); elsewhere each
    variable encoded as ``subprocess`` would."""
    data = getattr(os.environ, "_data", None)
    if os.name == "posix" and isinstance(data, dict):  # os.py keeps bytes there on POSIX
        return dict(data)
    return {os.fsencode(k): os.fsencode(v) for k, v in os.environ.items()}


class LocalExecEnv:
    """Runs commands on this host; spill files go to ``spill_dir`` (created lazily).

    ``spill_dir`` should be a directory the environment owns for one session (the
    harness passes ``<store dir>/spill/<session>/``), never a shared temp dir.
    ``kill_grace`` is how long a killed command gets between SIGTERM and SIGKILL.
    ``exit_grace`` is how long, after the shell exited by itself, processes it left
    behind may keep stdout/stderr open before its process group is killed.
    ``sandbox`` confines every command (see ``Sandbox``); it is checked here, so a host
    that cannot confine raises ``ExecConfigError`` before anything runs. The spill
    directory is then created up front and hidden from the command.
    ``max_background`` and ``idle_timeout`` bound the commands that outlive their
    call (``exec(..., yield_after=...)``, see ``BackgroundCommands``); ``aclose()``
    stops them. ``background`` shares an existing registry instead (its limits apply).
    ``stdin``: a descriptor (kept open by the caller) that every command not started
    with ``yield_after`` or ``tty`` reads as its standard input instead of ``/dev/null``
    (``toolfold run --detach`` gives it a FIFO that ``toolfold send`` writes to).
    """

    def __init__(
        self,
        spill_dir: Path | str,
        *,
        shell: str | None = None,
        kill_grace: float = DEFAULT_KILL_GRACE,
        exit_grace: float = DEFAULT_EXIT_GRACE,
        sandbox: Sandbox | None = None,
        max_background: int = DEFAULT_MAX_RUNNING,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        background: BackgroundCommands | None = None,
        stdin: int | None = None,
    ) -> None:
        for name, value in (("kill_grace", kill_grace), ("exit_grace", exit_grace)):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ExecConfigError(
                    f"LocalExecEnv {name} must be a number >= 0 (seconds), got {value!r}"
                )
        self.spill_dir = Path(spill_dir)
        self.shell = shell if shell is not None else _default_shell()
        self.kill_grace = float(kill_grace)
        self.exit_grace = float(exit_grace)
        if sandbox is not None:
            # Imported here: an unconfined environment needs nothing of the sandbox.
            from ._sandbox import Sandbox

            if not isinstance(sandbox, Sandbox):
                raise ExecConfigError(
                    f"LocalExecEnv sandbox must be a Sandbox or None, got {sandbox!r}"
                )
            sandbox.check()
        self.sandbox = sandbox
        self.stdin = stdin
        # An exec host shares one registry between the environments of its requests.
        # Otherwise the registry (and the background machinery) is made on first use: a
        # command that never goes to the background needs none of it. Its limits are
        # checked now all the same.
        if background is None:
            check_background_limits(max_background, idle_timeout)
        self._background = background
        self._background_limits = (max_background, idle_timeout)
        self._closed = False

    def _spawn_argv(
        self, command: str, env: Mapping[str, str], cwd: Path | str | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The argv and environment actually spawned for ``command``: the one place
        every way of starting a command goes through, so each is confined alike.

        Unconfined: ``[shell, "-c", command]`` and ``env`` as given (the same dict, not
        a copy: ``exec`` passes the one it built for this command). With a sandbox:
        ``bwrap <rules> -- shell -c command`` and ``env`` without secrets (the
        ``EXEC_ID_VAR`` marker the teardown looks for survives the filter).
        """
        argv = [self.shell, "-c", command]
        if self.sandbox is None:
            return argv, env if isinstance(env, dict) else dict(env)
        hide: list[str] = []
        with contextlib.suppress(OSError, ExecError):
            # Made now so the command cannot make it first (and own what is in it); if it
            # cannot be made, the command cannot make it either and the spill reports it.
            os.close(open_spill_dir(self.spill_dir))
            hide.append(str(self.spill_dir))
        where = os.fspath(cwd) if cwd is not None else os.getcwd()
        return self.sandbox.argv(argv, cwd=where, hide=hide), self.sandbox.env(env)

    @property
    def background(self) -> BackgroundCommands:
        """The commands of this environment that outlived their call (``exec(...,
        yield_after=...)``): read, write, signal, stop them."""
        if self._background is None:
            from ._background import BackgroundCommands

            max_running, idle_timeout = self._background_limits
            self._background = BackgroundCommands(
                max_running=max_running,
                idle_timeout=idle_timeout,
                kill_grace=self.kill_grace,
                ledger=self.spill_dir,
            )
            # Closed before any command went to the background: it refuses new ones.
            self._background._closed = self._closed
        return self._background

    async def aclose(self) -> list[BackgroundRead]:
        """Stop every background command still running; what each printed last."""
        self._closed = True
        if self._background is None:
            return []  # none ever ran (and none may start now)
        return await self._background.aclose()

    async def __aenter__(self) -> LocalExecEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

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
        """Run ``shell -c command`` in its own process group and capture its output.

        stdout and stderr feed one view in arrival order; ``on_update`` receives the
        paced ``ShellOutputUpdate`` stream (sync or async). ``env`` replaces the
        environment when given. ``timeout`` (seconds) and setting ``cancel`` kill the
        whole process group (SIGTERM, then SIGKILL after ``kill_grace``) and return a
        result with ``exit_code=None``; cancelling the task running ``exec`` does the
        same teardown and then propagates ``CancelledError``. In every case the latest
        bounded state is published before this returns or raises.

        ``yield_after`` (seconds): a command still running then is not waited for — the
        result holds its output so far and a ``handle``, and it goes on in the
        background (``self.background``: read, write, signal, stop), still bounded,
        spilled and paced, until it ends, its ``timeout``, ``stop`` or ``aclose``. Such a
        command's stdin is a pipe it can be written to (``/dev/null`` otherwise).
        ``tty``: run it on a pseudo-terminal (``_pty``; implies a writable stdin).

        Raises ``ExecStartError`` if the command cannot start, ``SpillError`` if the spill
        file cannot be written, ``CallbackError`` if ``on_update`` raised (the command is
        killed in both cases), ``BackgroundLimitError`` when ``yield_after`` is given and
        ``max_background`` commands already run.
        """
        if not isinstance(command, str):
            raise ExecConfigError(f"exec command must be a str, got {type(command).__name__}")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
        ):
            raise ExecConfigError(
                f"exec timeout must be a number of seconds > 0 or None, got {timeout!r}"
            )
        if yield_after is not None and (
            isinstance(yield_after, bool)
            or not isinstance(yield_after, int | float)
            or yield_after <= 0
        ):
            raise ExecConfigError(
                f"exec yield_after must be a number of seconds > 0 or None, got {yield_after!r}"
            )
        options = capture if capture is not None else CaptureOptions()
        if yield_after is not None:
            self.background.admit()
        adopted = False
        tracer = _otel.tracer()
        try:
            run = self._run(
                command, cwd, env, timeout, cancel, options, on_update, yield_after, bool(tty)
            )
            if tracer is None:
                result = await run
            else:
                from ._tracing import traced_exec  # only with a tracer configured

                result = await traced_exec(tracer, "local", run)
            adopted = result.handle is not None
            meters = _otel.meters()
            if meters is not None and not adopted:  # a background one is still writing
                from ._tracing import record_spill

                record_spill(meters, result.spill_path)
            return result
        finally:
            if yield_after is not None and not adopted:
                self.background.release()

    async def _run(
        self,
        command: str,
        cwd: Path | str | None,
        env: Mapping[str, str] | None,
        timeout: float | None,
        cancel: asyncio.Event | None,
        options: CaptureOptions,
        on_update: UpdateConsumer | None,
        yield_after: float | None,
        tty: bool,
    ) -> ShellExecResult:
        loop = asyncio.get_running_loop()
        failed: asyncio.Future[ExecError] = loop.create_future()
        reader_box: list[PipeReader] = []

        def on_failure(error: ExecError) -> None:
            if not failed.done():
                failed.set_result(error)

        session = CaptureSession(
            options,
            spill_dir=self.spill_dir,
            on_update=on_update,
            on_pause=lambda: reader_box[0].pause(),
            on_resume=lambda: reader_box[0].resume(),
            on_failure=on_failure,
        )
        protocol = ExecProtocol(loop)
        streams = Streams.open(tty=tty, writable=yield_after is not None, given=self.stdin)
        reader = PipeReader(loop, streams.read_ends, session, protocol.output_closed)
        reader_box.append(reader)
        # Every process of this command carries the marker, so the teardown can find
        # the ones that left the group and were adopted by us (see _reaper).
        become_subreaper()
        exec_id = new_exec_id()
        child_env: Mapping[str, str] | Mapping[bytes, bytes]
        try:
            if env is None and self.sandbox is None:
                # This process's environment as exec takes it (bytes): no str copy to
                # make and nothing for subprocess to encode, variable by variable.
                argv, child_env = [self.shell, "-c", command], _environ_bytes()
                child_env[_EXEC_ID_KEY] = exec_id.encode()
            else:
                str_env = dict(env) if env is not None else dict(os.environ)
                str_env[EXEC_ID_VAR] = exec_id
                argv, child_env = self._spawn_argv(command, str_env, cwd)
        except BaseException:
            reader.close()
            streams.close_child_ends()
            streams.close_stdin()
            raise
        preexec = _controlling_terminal() if tty else None
        try:
            if _spawn.pidfd_supported():
                # Started here, in this step of the loop: no task, nothing awaited, so no
                # cancellation can land half-way through the start.
                try:
                    transport: _spawn.ChildProcess = _spawn.start_pidfd_child(
                        loop,
                        protocol,
                        argv,
                        stdin=streams.child_stdin,
                        stdout=streams.child_stdout,
                        stderr=streams.child_stderr,
                        cwd=cwd,
                        env=child_env,
                        preexec_fn=preexec,
                    )
                finally:
                    # Only the child keeps the write ends, so end of file means it (and
                    # whatever it left behind) closed them.
                    streams.close_child_ends()
            else:
                transport = await self._start_in_asyncio(
                    loop, protocol, argv, streams, cwd, child_env, preexec, reader, session, exec_id
                )
        except OSError as exc:
            streams.close_stdin()
            reader.close()
            raise ExecStartError(
                f"cannot start {self.shell!r} -c {command[:80]!r} (cwd={str(cwd) if cwd else None!r}): "
                f"{exc.strerror or exc}; check that the shell exists and cwd is a directory"
            ) from exc
        reader.start()

        finished = self._exited_and_drained(protocol)
        cancel_wait = event_future(cancel) if cancel is not None else None
        waiters: list[asyncio.Future[object]] = [finished, failed]  # type: ignore[list-item]
        if cancel_wait is not None:
            waiters.append(cancel_wait)  # type: ignore[arg-type]
        timed_out = cancelled = background = False
        kill = True  # until we know the command ended by itself
        handoff: _Started | None = None
        yielding = yield_after is not None and (timeout is None or yield_after < timeout)
        try:
            done, _ = await asyncio.wait(
                waiters,
                timeout=yield_after if yielding else timeout,
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done and yielding and yield_after is not None:
                # Still running at the yield time: it goes on in the background.
                handoff = _Started(
                    self, transport, protocol, reader, session, exec_id, streams, failed
                )
                handle = self.background.adopt(
                    handoff,
                    command,
                    limits=options.limits,
                    timeout=None if timeout is None else timeout - yield_after,
                )
                kill = False
                return running_result(session, handle)
            if finished in done:
                # The shell exited by itself; if what it left behind still holds the
                # pipes after exit_grace, that group is killed (exit_code stays).
                kill = background = not finished.result()
            elif failed in done:
                pass
            elif cancel_wait is not None and cancel_wait in done:
                cancelled = True
            else:
                timed_out = True
            if kill and (protocol.exited.done() or has_exited(transport.get_pid())):
                # The shell had already exited by itself (we were in exit_grace): what
                # gets killed is its leftovers, and its own exit status stands.
                background = True
        finally:
            if not finished.done():
                finished.cancel()
            if cancel is not None and cancel_wait is not None:
                drop_event_future(cancel, cancel_wait)
            if handoff is None:
                streams.close_stdin()
                teardown = asyncio.ensure_future(
                    self._teardown(transport, protocol, reader, session, kill, exec_id)
                )
                # Teardown survives cancellation of exec: the group is killed and the
                # final state published even when the caller's task is being cancelled.
                view = await asyncio.shield(teardown)
        if session.failure is not None:
            raise session.failure
        returncode = transport.get_returncode()
        killed_command = kill and not background
        exit_code = None if killed_command or returncode is None or returncode < 0 else returncode
        return ShellExecResult.from_view(
            view,
            exit_code=exit_code,
            timed_out=timed_out,
            cancelled=cancelled,
            background_killed=background,
        )

    async def _start_in_asyncio(
        self,
        loop: asyncio.AbstractEventLoop,
        protocol: ExecProtocol,
        argv: list[str],
        streams: Streams,
        cwd: Path | str | None,
        env: Mapping[str, str] | Mapping[bytes, bytes],
        preexec: Callable[[], None] | None,
        reader: PipeReader,
        session: CaptureSession,
        exec_id: str,
    ) -> _spawn.ChildProcess:
        """The shell started through asyncio's subprocess machinery (no pidfd here)."""
        spawn = asyncio.ensure_future(
            _spawn.start_child(
                loop,
                protocol,
                argv,
                stdin=streams.child_stdin,
                stdout=streams.child_stdout,
                stderr=streams.child_stderr,
                cwd=cwd,
                env=env,
                preexec_fn=preexec,
            )
        )

        def close_write_ends(_: object) -> None:
            # Only the child keeps the write ends, so end of file means it (and whatever
            # it left behind) closed them; closed here however the start ends.
            streams.close_child_ends()

        spawn.add_done_callback(close_write_ends)
        try:
            # Shielded: a cancellation delivered inside asyncio's start-up would make it
            # SIGKILL the shell alone, leaving whatever the shell already forked running.
            return await asyncio.shield(spawn)
        except asyncio.CancelledError:
            streams.close_stdin()
            await asyncio.shield(
                asyncio.ensure_future(
                    self._stop_when_started(spawn, protocol, reader, session, exec_id)
                )
            )
            raise

    def _exited_and_drained(self, protocol: ExecProtocol) -> asyncio.Future[bool]:
        """Resolves once the shell exited and then the pipes closed or ``exit_grace``
        passed: True when both happened; False when something the shell left in the
        background still holds stdout/stderr (an agent must not wait on it until the
        timeout). Callbacks on the protocol's futures, not a task: cancelling it only
        detaches them."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bool] = loop.create_future()
        grace: list[asyncio.TimerHandle] = []

        def settle(_: object = None) -> None:
            if not done.done():
                done.set_result(protocol.pipes_closed.done())

        def exited(_: object) -> None:
            if done.done():
                return
            if protocol.pipes_closed.done():
                settle()
                return
            protocol.pipes_closed.add_done_callback(settle)
            grace.append(loop.call_later(self.exit_grace, settle))

        def detach(_: object) -> None:
            protocol.exited.remove_done_callback(exited)
            protocol.pipes_closed.remove_done_callback(settle)
            for timer in grace:
                timer.cancel()

        protocol.exited.add_done_callback(exited)
        done.add_done_callback(detach)
        return done

    async def _stop_when_started(
        self,
        spawn: asyncio.Future[_spawn.ChildProcess],
        protocol: ExecProtocol,
        reader: PipeReader,
        session: CaptureSession,
        exec_id: str,
    ) -> None:
        # exec was cancelled while the shell was starting: let the start finish (a few
        # loop iterations), then tear the whole group down.
        try:
            transport = await spawn
        except OSError:
            reader.close()
            return
        reader.start()  # so that the kill can see the pipes close
        await self._teardown(transport, protocol, reader, session, True, exec_id)

    async def _teardown(
        self,
        transport: _spawn.ChildProcess,
        protocol: ExecProtocol,
        reader: PipeReader,
        session: CaptureSession,
        kill: bool,
        exec_id: str,
    ) -> ShellOutputView:
        try:
            if kill:
                await self._kill_group(transport, protocol, exec_id)
                if self.sandbox is not None:
                    await self._end_sandbox(exec_id)
            elif self.sandbox is not None:
                await self._end_sandbox(exec_id)
            else:
                # Ended by itself: what it left running on purpose (output redirected)
                # stays; remember it, so it is reaped once it exits.
                reap_exited(command_processes(exec_id, None))
        finally:
            reader.close()
            transport.close()
            view = await session.finish()
        return view

    async def _end_sandbox(self, exec_id: str) -> None:
        # In a sandbox nothing outlives the command: its PID namespace ends with the
        # shell. bwrap reports the exit before that namespace is gone, so its init (now
        # adopted by us) is killed and reaped here; then the kernel has killed everything
        # else in it, and the ones that were adopted by us too are reaped.
        with contextlib.suppress(TimeoutError):
            await _spawn.kill_and_reap(ended_sandbox_inits(exec_id), 5.0)
        left = command_processes(exec_id, None)
        if left:
            signal_all(left, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.to_thread(reap_killed, left), 5.0)

    async def _kill_group(
        self, transport: _spawn.ChildProcess, protocol: ExecProtocol, exec_id: str
    ) -> None:
        pid = transport.get_pid()
        both = asyncio.gather(protocol.exited, protocol.pipes_closed)
        # Found while the shell still lives (its subtree is intact): the processes that
        # left its group (setsid) get the same signals as the group.
        shell = None if protocol.exited.done() else pid
        try:
            killed = terminate_command(pid, exec_id, shell)
            # Pipes closing too means no group member still holds them (all exited).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(both), self.kill_grace)
            # Whatever survived SIGTERM (or ignored it) is killed.
            killed = kill_command(pid, exec_id, killed)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(protocol.exited), 5.0)
            # The orphans among them are our children now (we are their subreaper).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.to_thread(reap_killed, killed), 5.0)
            # A process that left the group may still hold the pipes: read what is
            # buffered for a moment, then close them regardless.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(protocol.pipes_closed), 1.0)
        finally:
            if not both.done():
                both.cancel()


class _Started:
    """A running command handed to ``BackgroundCommands`` (its ``Process``)."""

    def __init__(
        self,
        env: LocalExecEnv,
        transport: _spawn.ChildProcess,
        protocol: ExecProtocol,
        reader: PipeReader,
        session: CaptureSession,
        exec_id: str,
        streams: Streams,
        failed: asyncio.Future[ExecError],
    ) -> None:
        self._env = env
        self._failed = failed
        self._transport = transport
        self._protocol = protocol
        self._reader = reader
        self.session = session
        self._exec_id = self.exec_id = exec_id
        self.pid = transport.get_pid()
        self.stdin = streams.stdin
        self.tty = streams.tty

    async def finished(self) -> bool:
        # A spill or consumer failure ends it like leftovers holding the output: killed.
        ended = self._env._exited_and_drained(self._protocol)
        try:
            waiters: list[asyncio.Future[Any]] = [ended, self._failed]
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not ended.done():
                ended.cancel()
        return ended.done() and not ended.cancelled() and ended.result()

    async def teardown(self, kill: bool) -> ShellOutputView:
        return await self._env._teardown(
            self._transport, self._protocol, self._reader, self.session, kill, self._exec_id
        )

    def returncode(self) -> int | None:
        return self._transport.get_returncode()

    def drain(self) -> None:
        self._reader.drain()

    def send_signal(self, sig: signal.Signals) -> None:
        if self._env.sandbox is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)
            return
        # The shell is bwrap, and its child the PID namespace's init: a signal to either
        # ends the whole sandbox. The command is what runs below that init.
        signal_all(below_children(self.pid), sig)
