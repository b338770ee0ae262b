"""``toolfold run``: one shell command as a durable ``bash`` tool call, with a live view."""

from __future__ import annotations

import asyncio
import datetime
import signal
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from toolfold.durability import DEFAULT_LEASE_TTL, default_host_id
from toolfold.execenv import (
    DEFAULT_HEAD_SHARE,
    DEFAULT_MAX_SPILL,
    RETAIN_MODES,
    ExecConfigError,
    ExecError,
    LocalExecEnv,
)
from toolfold.harness import Durability, DurableHooks, Harness, ToolCall, ToolContext
from toolfold.history import mark_activity, new_run_record, run_record_address, settled_record
from toolfold.output import OutputPolicy
from toolfold.storage import StorageError, set_value, storage_failure

from ._errors import InvalidLimitError, RemoteOptionError, StoreWriteError
from ._process import _arun, _check_session_name, _exit, _finish, _quote
from ._run_result import (
    EXIT_CANCELLED,
    checkpoint_interval,
    exit_status,
    new_session_name,
    print_result,
    print_summary,
    unrecorded_end,
)
from ._sandbox import sandbox_choice, store_paths
from ._store import StoreSpec, open_store, report_notes, resolve_store
from ._tools import cli_bash
from ._view import CallWatcher, LiveView, PlainView

if TYPE_CHECKING:
    from toolfold.execenv import Sandbox, Transport

    from ._run_remote import RemoteSettings

MAX_WINDOW_BYTES = 16 * 1024 * 1024
"""Largest ``--max-bytes``: the window lives in memory and every durable base batch
carries it whole, so a bigger one defeats the point of bounding."""

MAX_WINDOW_LINES = 1_000_000
"""Largest ``--max-lines`` (same reason)."""

EXIT_TERMINATED = 143
"""Exit status after SIGTERM (128 + SIGTERM)."""

_DEFAULT_REMOTE_COMMAND = "toolfold exec-host"
"""``--remote-command``'s default (``execenv.DEFAULT_REMOTE_COMMAND``, which a local run
does not import; a test keeps the two equal)."""

MIN_LEASE, MAX_LEASE = 0.5, 3600.0
"""Bounds of ``--lease``: shorter renews too often for a store to follow (a heartbeat
every third of it); longer leaves a dead host's call unsettled for over an hour."""


def lease_seconds(seconds: float | None) -> float:
    """``--lease``: the lease length in seconds; ``InvalidLimitError`` names a bad one."""
    if seconds is None:
        return DEFAULT_LEASE_TTL
    if not MIN_LEASE <= seconds <= MAX_LEASE:
        raise InvalidLimitError(
            f"--lease must be between {MIN_LEASE:g} and {MAX_LEASE:g} seconds, got {seconds:g}; "
            f"the default is {DEFAULT_LEASE_TTL:g}"
        )
    return seconds


def head_share_value(head_share: float | None, retain: str | None, retain_flag: str) -> float:
    """``--head-share``, checked: a fraction strictly between 0 and 1, and only with
    ``retain_flag head_tail`` (the other windows have no head part to size)."""
    if head_share is None:
        return DEFAULT_HEAD_SHARE
    if retain != "head_tail":
        raise InvalidLimitError(
            f"--head-share applies to {retain_flag} head_tail; add {retain_flag} head_tail "
            "or drop --head-share"
        )
    if not 0 < head_share < 1:
        raise InvalidLimitError(
            f"--head-share must be a fraction between 0 and 1 (exclusive), got {head_share:g}; "
            f"the default is {DEFAULT_HEAD_SHARE:g}"
        )
    return head_share


def output_policy(
    retain: str, max_bytes: int | None, max_lines: int | None, head_share: float | None = None
) -> OutputPolicy:
    """The ``bash`` output policy for ``run``'s limits; ``InvalidLimitError`` names a bad one."""
    default = OutputPolicy()
    if retain not in RETAIN_MODES:
        raise InvalidLimitError(f"--retain must be 'head', 'tail' or 'head_tail', got {retain!r}")
    share = head_share_value(head_share, retain, "--retain")
    checked: dict[str, int] = {}
    for flag, given, fallback, top in (
        ("--max-bytes", max_bytes, default.max_bytes, MAX_WINDOW_BYTES),
        ("--max-lines", max_lines, default.max_lines, MAX_WINDOW_LINES),
    ):
        n = fallback if given is None else given
        low = 2 if retain == "head_tail" else 1  # one for the head, one for the tail
        if n < low or n > top:
            raise InvalidLimitError(
                f"{flag} must be between {low} and {top:,}"
                + (" with --retain head_tail" if low == 2 else "")
                + f", got {n}; the default is {fallback:,}"
            )
        checked[flag] = n
    return OutputPolicy(
        retain=next(mode for mode in RETAIN_MODES if mode == retain),
        max_bytes=checked["--max-bytes"],
        max_lines=checked["--max-lines"],
        head_share=share,
    )


def spill_cap(size: int | None) -> int:
    """``--max-spill`` (already read by the one size parser), checked."""
    if size is None:
        return DEFAULT_MAX_SPILL
    if size < 1:
        raise InvalidLimitError(
            f"--max-spill must be a positive size such as 1048576, 512M or 2G, got {size}; "
            "the default is 1G"
        )
    return size


@dataclass
class RunSettings:
    """Everything ``toolfold run`` was asked to do."""

    spec: StoreSpec
    session: str
    command: str
    policy: OutputPolicy
    live: bool
    as_json: bool = False
    remote: RemoteSettings | None = None
    max_spill: int = DEFAULT_MAX_SPILL
    lease_ttl: float = DEFAULT_LEASE_TTL
    """The call's lease: while this process runs it, it renews the lease every third of
    it; once it expired (the process died), a ``toolfold serve --resume-orphans`` on the
    store settles the call."""
    sandbox: Sandbox | None = None
    """Confines the command (a local one; a remote one is confined by its exec host)."""
    stdin: int | None = None
    """The command's standard input (a local one; default ``/dev/null``): the FIFO of a
    detached run (``_detach``)."""
    on_started: Callable[[str], None] | None = None
    """Called with the call's id once it is started (a detached run says it is ready)."""


def remote_settings(
    ssh: str | None,
    ssh_options: tuple[str, ...],
    prefix: str | None,
    remote_command: str,
    remote_cwd: str | None,
    sandbox_args: list[str] | None = None,
) -> RemoteSettings | None:
    """The remote target of ``run``'s options, or ``None`` to run here; ``RemoteOptionError``
    names a bad combination."""
    if ssh is not None and prefix is not None:
        raise RemoteOptionError("--ssh and --exec-host exclude each other; give one of them")
    if ssh is None and prefix is None:
        if ssh_options or remote_cwd is not None or remote_command != _DEFAULT_REMOTE_COMMAND:
            raise RemoteOptionError(
                "--ssh-option, --remote-command and --remote-cwd need --ssh DEST or --exec-host PREFIX"
            )
        return None
    if ssh_options and ssh is None:
        raise RemoteOptionError("--ssh-option needs --ssh DEST")
    if not remote_command.strip():
        raise RemoteOptionError(
            "--remote-command must not be empty; the default is 'toolfold exec-host'"
        )
    import shlex  # a remote run's options only

    if sandbox_args and sandbox_args[1] != "off":
        # The exec host confines its own commands: it gets the same options.
        remote_command = " ".join([remote_command, *(shlex.quote(a) for a in sandbox_args)])
    from toolfold.execenv import CommandTransport, SSHTransport  # only for a remote run

    from ._run_remote import RemoteSettings

    try:
        transport: Transport
        if ssh is not None:
            words = [word for option in ssh_options for word in shlex.split(option)]
            transport = SSHTransport(ssh, options=words, remote_command=remote_command)
        else:
            transport = CommandTransport(prefix or "", remote_command=remote_command)
            transport.argv()
    except (ExecConfigError, ValueError) as exc:
        raise RemoteOptionError(str(exc)) from exc
    return RemoteSettings(transport, remote_cwd)


async def run_call(settings: RunSettings) -> int:
    """Run the command as one durable ``bash`` call; return the exit status."""
    context, where = await _context(settings)
    try:
        return await _run_call(settings, context, where)
    finally:
        if settings.remote is not None:
            from toolfold.execenv import RemoteExecEnv

            if isinstance(context.env, RemoteExecEnv):
                await context.env.aclose()  # the exec host kills anything still running


async def _context(settings: RunSettings) -> tuple[ToolContext, str]:
    """The tools' context (local, or connected to the exec host) and where spill files go."""
    remote = settings.remote
    if remote is None:
        spill_dir = settings.spec.spill_dir(settings.session)
        local = LocalExecEnv(spill_dir, sandbox=settings.sandbox, stdin=settings.stdin)
        return ToolContext(env=local, cwd=Path.cwd()), str(spill_dir)
    env = remote.env(settings.session)
    try:
        host = await env.connect()
    except ExecError as exc:
        raise RemoteOptionError(" ".join(str(exc).split())) from exc
    cwd = remote.cwd if remote.cwd is not None else host.cwd
    where = f"{remote.transport.describe()}:{host.spill_dir}/{settings.session}"
    return ToolContext(env=env, cwd=Path(cwd)), where


async def _run_call(settings: RunSettings, context: ToolContext, where: str) -> int:
    spec = settings.spec
    async with open_store(spec, create=True) as repo:
        session = await repo.open_session(settings.session, create=True)
        report_notes(session)
        if settings.remote is None:
            # Only once the store is open: an explicit store in a missing directory is
            # refused before anything is created there.
            mark_activity(spec.spill_dir(settings.session))  # the landing page's order
        run_id = f"run-{uuid.uuid4().hex[:12]}"
        call_id = f"call-{uuid.uuid4().hex[:12]}"
        started = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
        record = new_run_record(settings.command, where, started)
        # Leased, so another process (or machine) on the store can tell whether the
        # call still runs: `toolfold resume` skips it while the lease is live, and a
        # `serve --resume-orphans` janitor settles it once this process died.
        durability = Durability(
            session,
            host=default_host_id(),
            lease_ttl=settings.lease_ttl,
            interval=checkpoint_interval(),
        )
        hooks = DurableHooks(durability)
        # The run record goes in with the lease, and the output's totals and spill path
        # (what readers of the store show beside the settled result) with the settlement.
        hooks.record_call(
            run_id,
            call_id,
            start=[set_value(run_record_address(call_id), record)],
            settled=lambda result: (
                [settled_record(call_id, record, result.state)] if result.state is not None else []
            ),
        )
        harness = Harness(
            # bash alone: the only tool `run` calls (and the others would import pydantic)
            [cli_bash(settings.policy, max_spill=settings.max_spill)],
            context=context,
            hooks=hooks,
        )
        watcher = CallWatcher()
        harness.bus.add_listener(watcher.handle)
        title = (
            f"{settings.command}  [call {call_id} in session {settings.session}, "
            f"store {spec.describe()}]"
        )
        view: LiveView | PlainView = (
            LiveView(watcher, title) if settings.live else PlainView(watcher, title)
        )
        cancel = asyncio.Event()
        signalled: list[int] = []
        loop = asyncio.get_running_loop()
        task = loop.create_task(
            harness.run(
                [ToolCall(call_id, "bash", {"command": settings.command, "yield_after": None})],
                run_id=run_id,
                cancel=cancel,
            )
        )

        def on_signal(signum: int) -> Callable[[], None]:
            def handler() -> None:
                signalled.append(signum)
                if len(signalled) == 1:
                    # First signal: cancel the call cooperatively (bash kills its
                    # process group; the partial output settles as cancelled).
                    cancel.set()
                    view.note("cancelling the command (signal again to stop waiting for it)")
                elif len(signalled) == 2:
                    # Second signal: stop waiting for a cooperative end.
                    task.cancel()
                    view.note("interrupting: the call settles as interrupted")

            return handler

        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, on_signal(signum))
        if settings.on_started is not None:
            settings.on_started(call_id)
        view.start()
        store_failure: StorageError | None = None
        try:
            try:
                results = await task
            except asyncio.CancelledError:
                results = []
            except BaseExceptionGroup as group:
                # The call ran, but the store refused to record its end (a full disk):
                # the harness raises it from the call's task group.
                store_failure = storage_failure(group)
                if store_failure is None:
                    raise
                results = []
        finally:
            await view.stop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
        if store_failure is not None:
            raise StoreWriteError(
                unrecorded_end(spec, settings.session, call_id, store_failure)
            ) from store_failure
        message: dict[str, Any] | None = watcher.settled
        if message is None and results:
            message = results[0].to_message().to_json()
        if message is None:
            print(
                f"toolfold: call {call_id} was interrupted before it settled; "
                f"run `toolfold resume {settings.session}`",
                file=sys.stderr,
            )
            return EXIT_CANCELLED
        print_result(message, as_json=settings.as_json)
        if results:
            status = exit_status(results[0], signalled[0] if signalled else None)
        else:
            status = 128 + signalled[0] if signalled else EXIT_CANCELLED
        # A remote run's spill file is on the exec host: the line says which.
        host = settings.remote.transport.describe() if settings.remote else None
        print_summary(watcher, message, status, spec, settings.session, call_id, spill_host=host)
        return status


__all__ = [
    "EXIT_CANCELLED",
    "RunSettings",
    "exit_status",
    "lease_seconds",
    "new_session_name",
    "output_policy",
    "print_result",
    "run_call",
]


def run_command(
    *,
    session: str | None,
    store: str | None,
    retain: str,
    head_share: float | None,
    max_bytes: int | None,
    max_lines: int | None,
    max_spill: int | None,
    as_json: bool,
    ssh: str | None,
    ssh_options: tuple[str, ...],
    exec_host_prefix: str | None,
    remote_command: str,
    remote_cwd: str | None,
    lease: float | None,
    sandbox_profile: str,
    sandbox_write: tuple[str, ...],
    sandbox_network: bool,
    detach: bool,
    detached_worker: int | None,
    command: tuple[str, ...],
) -> NoReturn:
    """``toolfold run``, its options parsed (by click, or for a bare ``run -- COMMAND``
    by ``_entry.py`` with ``RUN_DEFAULTS``): run the call and end with its exit status."""
    choice = sandbox_choice(sandbox_profile, sandbox_write, sandbox_network)
    remote = remote_settings(
        ssh, ssh_options, exec_host_prefix, remote_command, remote_cwd, choice.args()
    )
    spec = resolve_store(store)
    # Checked here, so a host that cannot confine fails before anything is recorded.
    sandbox = choice.build(hidden=store_paths(spec)) if remote is None else None
    policy = output_policy(retain, max_bytes, max_lines, head_share)
    cap = spill_cap(max_spill)
    ttl = lease_seconds(lease)
    name = session if session is not None else new_session_name()
    _check_session_name(name)
    text = command[0] if len(command) == 1 else " ".join(_quote(part) for part in command)
    if detach:
        import click  # --detach is parsed by click: its worker's arguments come from there

        from ._detach import start_detached

        ctx = click.get_current_context()
        _exit(start_detached(ctx, spec, name, command, local=remote is None))
    worker = None
    if detached_worker is not None:
        from ._detach import Worker

        worker = Worker.setup(
            spec, name, text, detached_worker, local=remote is None, retain=retain
        )
    settings = RunSettings(
        spec,
        name,
        text,
        policy,
        live=worker is None and sys.stdout.isatty() and sys.stderr.isatty(),
        as_json=as_json,
        remote=remote,
        max_spill=cap,
        lease_ttl=ttl,
        sandbox=sandbox,
        stdin=worker.stdin if worker is not None else None,
        on_started=worker.on_started if worker is not None else None,
    )
    try:
        status = _arun(run_call(settings), spec)
    finally:
        if worker is not None:
            worker.close()
    if worker is not None:
        _exit(status)  # a detached run's worker ends the ordinary way
    _finish(status)
