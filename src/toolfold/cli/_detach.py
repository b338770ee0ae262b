"""``toolfold run --detach``: a run that outlives the shell command that started it.

``run --detach`` checks its options as ``run`` does, then starts a worker: the very same
``toolfold run`` (same options, same session, same store) in a process of its own
session (``setsid``: no controlling terminal, out of the shell's job control), with
stdout and stderr going to a log file. It prints the run's id — its session name — once
the worker has started the call, and returns.

Each detached run has a control directory, ``<store dir>/detached/<id>/`` (0700):

- ``run.json`` — the worker's pid and start time, the session, the call id, the
  command, and the random mark its processes carry (``TOOLFOLD_DETACHED=<mark>``);
- ``stdin`` — a FIFO (0600) that is the command's standard input. The worker keeps a
  write end open, so the command waits for input instead of reading end of file;
  ``toolfold send`` writes to it, and ``send --eof`` asks the worker (SIGUSR1) to close
  that end, so the command sees end of file once the senders are done;
- ``worker.log`` — what the worker printed (the model-visible result, its summary line).

The worker removes the directory when the call has settled; its result stays in the
store (``toolfold show ID``). Every file follows the project's file rule
(``toolfold._fsperm``): the directories are toolfold's own, never reached through a
symbolic link, never adopted from another user; the files are opened ``O_NOFOLLOW`` and
checked on the open descriptor (owner, type, mode).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import select
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import click

from toolfold._fsperm import UnsafePathError, make_private_dirs, open_private_dir

from ._errors import CliError
from ._store import StoreSpec

DETACHED = "detached"
RUN_FILE = "run.json"
STDIN_FIFO = "stdin"
LOG_FILE = "worker.log"
MARK_VAR = "TOOLFOLD_DETACHED"
"""Every process of a detached run (the worker, the command, what it forks) carries
``MARK_VAR=<mark>``: ``toolfold stop`` kills them by it when the worker does not end."""
MAX_RUN_FILE = 64 * 1024
MAX_LOG_TAIL = 4096
READY_TIMEOUT = 60.0
"""How long ``run --detach`` waits for the worker to start the call (a store on a slow
disk, a remote host to connect to) before it gives up and says so."""
MAX_LISTED = 10_000
"""At most this many control directories are looked at by ``ps`` (a bound on the scan)."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O = _NOFOLLOW | os.O_CLOEXEC


def detached_root(spec: StoreSpec) -> str:
    return str(spec.home / DETACHED)


def refuse_link(path: str, exc: OSError) -> OSError:
    if os.path.islink(path):
        return UnsafePathError(
            f"refusing {path}: it is a symbolic link; toolfold follows no link it did not "
            "create; remove it",
            path,
        )
    return exc


def open_control(spec: StoreSpec, run_id: str, *, create: bool) -> int:
    """A descriptor of the run's control directory (created 0700 when ``create``).
    Raises ``UnsafePathError`` (a link, another user's) or ``FileNotFoundError``."""
    return open_private_dir(spec.home, DETACHED, run_id, create=create)


def check_private(fd: int, path: str, kind: Callable[[int], bool], what: str) -> None:
    st = os.fstat(fd)
    if not kind(st.st_mode):
        raise UnsafePathError(f"refusing {path}: it is not {what}; remove it", path)
    if st.st_uid != os.geteuid():
        raise UnsafePathError(
            f"refusing {path}: it is owned by uid {st.st_uid}, not you (uid {os.geteuid()}); "
            "remove it",
            path,
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise UnsafePathError(
            f"refusing {path}: others may use it (mode {stat.S_IMODE(st.st_mode):04o}); remove it",
            path,
        )


def read_run_file(dir_fd: int, where: str) -> dict[str, Any]:
    """The run's ``run.json`` (refused when it is a link, another user's, or shared)."""
    path = os.path.join(where, RUN_FILE)
    try:
        fd = os.open(RUN_FILE, os.O_RDONLY | _O, dir_fd=dir_fd)
    except OSError as exc:
        raise refuse_link(path, exc) from exc
    try:
        check_private(fd, path, stat.S_ISREG, "a regular file")
        data = os.read(fd, MAX_RUN_FILE + 1)
    finally:
        os.close(fd)
    try:
        info = json.loads(data) if len(data) <= MAX_RUN_FILE else None
    except ValueError:
        info = None
    if not isinstance(info, dict):
        raise CliError(f"{path} is not a detached run's record; remove {where}")
    return info


def write_run_file(dir_fd: int, info: dict[str, Any]) -> None:
    """Replace ``run.json`` atomically (a private temporary file, then rename)."""
    tmp = f".{RUN_FILE}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O, 0o600, dir_fd=dir_fd)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, json.dumps(info).encode())
    finally:
        os.close(fd)
    os.rename(tmp, RUN_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def start_time(pid: int) -> str | None:
    """The start time of ``pid`` (field 22 of ``/proc/PID/stat``), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[-1].split()
    except OSError:
        return None
    return None if fields[0] == b"Z" else fields[19].decode()


def worker_alive(info: dict[str, Any]) -> bool:
    """Whether the run's worker still runs (its pid with the same start time)."""
    pid = info.get("pid")
    return isinstance(pid, int) and pid > 0 and start_time(pid) == info.get("start")


def remove_control(spec: StoreSpec, run_id: str) -> None:
    """Remove the run's control directory and what it holds (best effort)."""
    with contextlib.suppress(OSError):
        dir_fd = open_control(spec, run_id, create=False)
        try:
            for name in os.listdir(dir_fd):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        parent = open_private_dir(spec.home, DETACHED, create=False)
        try:
            os.rmdir(run_id, dir_fd=parent)
        finally:
            os.close(parent)


@dataclass(frozen=True)
class DetachedRun:
    """One control directory, as ``ps`` lists it."""

    run_id: str
    info: dict[str, Any]
    alive: bool


def list_runs(spec: StoreSpec) -> Iterator[DetachedRun]:
    """The detached runs of the store (the first ``MAX_LISTED`` control directories);
    one that cannot be read is skipped."""
    try:
        root = open_private_dir(spec.home, DETACHED, create=False)
    except FileNotFoundError:
        return
    try:
        with os.scandir(root) as entries:
            names = [e.name for _, e in zip(range(MAX_LISTED), entries, strict=False)]
    finally:
        os.close(root)
    for name in sorted(names):
        try:
            dir_fd = open_control(spec, name, create=False)
        except OSError:
            continue
        try:
            info = read_run_file(dir_fd, os.path.join(detached_root(spec), name))
        except (OSError, CliError):
            continue
        finally:
            os.close(dir_fd)
        yield DetachedRun(name, info, worker_alive(info))


def load_run(spec: StoreSpec, run_id: str) -> tuple[int, dict[str, Any]]:
    """The control directory descriptor and record of ``run_id``; a clear error when
    there is none (it ended: its result is in the store)."""
    where = os.path.join(detached_root(spec), run_id)
    try:
        dir_fd = open_control(spec, run_id, create=False)
    except FileNotFoundError:
        raise CliError(
            f"no detached run {run_id!r} in {detached_root(spec)}: it has ended (see "
            f"`toolfold show {run_id}`), or see `toolfold ps` for the running ones"
        ) from None
    try:
        return dir_fd, read_run_file(dir_fd, where)
    except FileNotFoundError:
        os.close(dir_fd)
        raise CliError(
            f"detached run {run_id!r} has no record yet (it is starting, or its start "
            f"failed: see {where}/{LOG_FILE})"
        ) from None
    except BaseException:
        os.close(dir_fd)
        raise


# -- starting -----------------------------------------------------------------------


def worker_argv(
    ctx: click.Context, session: str, ready_fd: int, command: tuple[str, ...]
) -> list[str]:
    """The worker's command line: this ``run`` with the options the user gave (read
    back from click, so every option is passed on as given), ``--session`` fixed and
    ``--detach`` replaced by the hidden ``--detached-worker FD``."""
    from click.core import ParameterSource

    argv = [sys.executable, "-m", "toolfold.cli", "run"]
    for param in ctx.command.params:
        name = param.name
        if (
            not isinstance(param, click.Option)
            or name in ("detach", "detached_worker", "session")
            or name is None
            or ctx.get_parameter_source(name) in (ParameterSource.DEFAULT, None)
        ):
            continue
        value = ctx.params.get(name)
        flag = param.opts[0]
        if param.is_flag:
            if value:
                argv.append(flag)
        elif param.multiple:
            for item in value or ():
                argv += [flag, str(item)]
        elif value is not None:
            argv += [flag, str(value)]
    return [*argv, "--session", session, "--detached-worker", str(ready_fd), "--", *command]


def start_detached(
    ctx: click.Context, spec: StoreSpec, session: str, command: tuple[str, ...], local: bool
) -> int:
    """Start the worker for ``toolfold run --detach``; print the run id when it runs."""
    if spec.kind == "memory":
        raise CliError(
            "--detach needs a store that outlives this process; memory: keeps nothing "
            "(use the default store, sqlite:PATH or jsonl:DIR)"
        )
    if spec.default:
        make_private_dirs(spec.home)
    elif not os.path.isdir(spec.home):
        raise CliError(f"the store's directory {spec.home} does not exist; create it first")
    dir_fd = open_control(spec, session, create=True)
    where = os.path.join(detached_root(spec), session)
    try:
        with contextlib.suppress(FileNotFoundError):
            old = read_run_file(dir_fd, where)
            if worker_alive(old):
                raise CliError(
                    f"a detached run of session {session!r} is already running (pid "
                    f"{old.get('pid')}); `toolfold stop {session}` stops it"
                )
        for name in os.listdir(dir_fd):  # what an earlier run of this session left
            os.unlink(name, dir_fd=dir_fd)
        if local:
            os.mkfifo(STDIN_FIFO, 0o600, dir_fd=dir_fd)
        log = os.open(LOG_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O, 0o600, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    ready_r, ready_w = os.pipe()
    env = dict(os.environ)
    env[MARK_VAR] = os.urandom(8).hex()
    try:
        worker = subprocess.Popen(
            worker_argv(ctx, session, ready_w, command),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            pass_fds=(ready_w,),
            env=env,
        )
    finally:
        os.close(ready_w)
        os.close(log)
    try:
        ready, _, _ = select.select([ready_r], [], [], READY_TIMEOUT)
        answer = os.read(ready_r, 64) if ready else b""
    finally:
        os.close(ready_r)
    if answer != b"ok\n":
        failed = worker.poll() is not None
        tail = _log_tail(spec, session)
        if not failed:
            worker.terminate()
        remove_control(spec, session)
        why = (
            f"it ended with status {worker.returncode}"
            if failed
            else f"it did not start the call within {READY_TIMEOUT:g} s, so it was stopped"
        )
        raise CliError(f"the detached run could not start: {why}" + (f": {tail}" if tail else ""))
    print(session, flush=True)
    print(
        f"toolfold: detached run {session} (pid {worker.pid}) · `toolfold attach {session}` "
        f"follows its output · `toolfold send {session} TEXT` types a line · "
        f"`toolfold stop {session}` stops it · `toolfold ps` lists detached runs",
        file=sys.stderr,
        flush=True,
    )
    return 0


def _log_tail(spec: StoreSpec, run_id: str) -> str:
    """The last line(s) of a worker's log (bounded), for an error message."""
    try:
        dir_fd = open_control(spec, run_id, create=False)
    except OSError:
        return ""
    try:
        fd = os.open(LOG_FILE, os.O_RDONLY | _O, dir_fd=dir_fd)
    except OSError:
        return ""
    finally:
        os.close(dir_fd)
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, MAX_LOG_TAIL, max(0, size - MAX_LOG_TAIL))
    finally:
        os.close(fd)
    lines = [ln for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return " ".join(lines[-1].split()) if lines else ""


# -- the worker ---------------------------------------------------------------------


@dataclass
class Worker:
    """The worker's side: the command's stdin and the ``on_started`` that records the
    call and tells ``run --detach`` it may return."""

    spec: StoreSpec
    run_id: str
    command: str
    ready_fd: int
    retain: str
    stdin: int | None = None
    keep: int | None = None
    started: bool = False

    @classmethod
    def setup(
        cls, spec: StoreSpec, run_id: str, command: str, ready_fd: int, *, local: bool, retain: str
    ) -> Worker:
        worker = cls(spec, run_id, command, ready_fd, retain)
        os.set_inheritable(ready_fd, False)  # the command must not hold it
        if local:
            dir_fd = open_control(spec, run_id, create=False)
            path = os.path.join(detached_root(spec), run_id, STDIN_FIFO)
            try:
                # Our write end first (a FIFO opened O_RDWR never blocks): while we hold
                # it the command's reads wait for input instead of seeing end of file.
                keep = os.open(STDIN_FIFO, os.O_RDWR | os.O_NONBLOCK | _O, dir_fd=dir_fd)
                worker.keep = keep
                check_private(keep, path, stat.S_ISFIFO, "a FIFO")
                reader = os.open(STDIN_FIFO, os.O_RDONLY | os.O_NONBLOCK | _O, dir_fd=dir_fd)
                os.set_blocking(reader, True)  # the command reads it as a plain stdin
                worker.stdin = reader
            finally:
                os.close(dir_fd)
            signal.signal(signal.SIGUSR1, worker._end_of_input)
        worker._record(None)
        return worker

    def _end_of_input(self, signum: int, frame: object) -> None:
        keep, self.keep = self.keep, None
        if keep is not None:
            os.close(keep)

    def _record(self, call_id: str | None) -> None:
        dir_fd = open_control(self.spec, self.run_id, create=False)
        try:
            write_run_file(
                dir_fd,
                {
                    "pid": os.getpid(),
                    "start": start_time(os.getpid()),
                    "mark": os.environ.get(MARK_VAR),
                    "session": self.run_id,
                    "call_id": call_id,
                    "command": self.command[:1000],
                    "cwd": os.getcwd(),
                    "input": self.stdin is not None,
                    "retain": self.retain,
                    "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                },
            )
        finally:
            os.close(dir_fd)

    def on_started(self, call_id: str) -> None:
        self.started = True
        self._record(call_id)
        with contextlib.suppress(OSError):
            os.write(self.ready_fd, b"ok\n")
        with contextlib.suppress(OSError):
            os.close(self.ready_fd)

    def close(self) -> None:
        for fd in (self.stdin, self.keep):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.stdin = self.keep = None
        if self.started:
            remove_control(self.spec, self.run_id)
        # else: the start failed; `run --detach` reads the log and removes the directory
