"""Finding, killing and reaping every process of one command, including those that left
its process group (``setsid cmd &``) or were orphaned by a parent that exited.

Two mechanisms, both Linux-only (elsewhere only the process group is killed):

- **Child subreaper.** ``prctl(PR_SET_CHILD_SUBREAPER)`` makes this Python process the
  parent of every orphan in its subtree, instead of init. An escaped process therefore
  stays findable below us, and its exit status comes to us.
- **A per-command marker.** Each command's shell gets ``TOOLFOLD_EXEC_ID=<random>`` in its
  environment, which every descendant inherits (``setsid`` does not touch it). A
  process adopted by us has lost its link to the shell that started it; the marker in
  ``/proc/<pid>/environ`` tells which command it belongs to.

The processes of a command are: the shell's current descendants (walking
``/proc/<pid>/task/<tid>/children``), plus every process below us whose environment
carries the command's marker, plus their descendants. We never signal or reap anything
else: other children of this process (an unrelated ``subprocess.run``, another
command's shell) are not ours to touch. See docs/execenv.md ("Escaped processes").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterable

__all__ = [
    "DEFAULT_EXIT_GRACE",
    "DEFAULT_KILL_GRACE",
    "EXEC_ID_VAR",
    "become_subreaper",
    "below_children",
    "command_processes",
    "ended_sandbox_inits",
    "new_exec_id",
    "reap_exited",
    "reap_killed",
    "signal_all",
]

DEFAULT_KILL_GRACE = 2.0
"""Seconds a stopped command gets between SIGTERM and SIGKILL (``LocalExecEnv``'s
``kill_grace``, and ``run``'s direct driver)."""

DEFAULT_EXIT_GRACE = 1.0
"""Seconds the pipes may stay open after the shell exited by itself before what it left
holding them is killed (``LocalExecEnv``'s ``exit_grace``, and the direct driver)."""

EXEC_ID_VAR = "TOOLFOLD_EXEC_ID"
"""The environment variable that marks every process of one command."""

_PR_SET_CHILD_SUBREAPER = 36
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process the child subreaper of its subtree (once; Linux only).

    It applies to the whole process: orphans of *any* child it started are reparented
    to it. Only processes of our commands are reaped here (``reap_adopted``); an orphan
    of some other child stays a zombie until this process exits, as it would under
    init until init reaped it.
    """
    global _subreaper
    if _subreaper is None:
        _subreaper = False
        if sys.platform.startswith("linux"):
            with contextlib.suppress(OSError, AttributeError):
                _subreaper = _prctl()(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    return _subreaper


def _prctl() -> Callable[..., int]:
    """libc's ``prctl``, looked up in the process's own symbols (which hold libc's)
    rather than through ``ctypes.util.find_library``, which imports tempfile and friends
    and runs ``ldconfig -p``.

    Through the C module ``_ctypes`` when it has what a call needs: ``import ctypes``
    costs every ``toolfold run`` about 1.2 ms of start-up (it builds its whole type
    zoo), the few names below about 0.3 ms. The same call as ``ctypes.CDLL(None).prctl``
    (``int`` arguments, an ``int`` result, the C calling convention); ``ctypes`` itself
    if ``_ctypes`` lacks any of these names.
    """
    try:
        import _ctypes

        simple, function = _ctypes._SimpleCData, _ctypes.CFuncPtr
        cdecl, dlopen, dlsym = _ctypes.FUNCFLAG_CDECL, _ctypes.dlopen, _ctypes.dlsym
    except (ImportError, AttributeError):
        import ctypes

        prctl: Callable[..., int] = ctypes.CDLL(None).prctl
        return prctl

    class _Int(simple):  # type: ignore[misc,valid-type]
        _type_ = "i"

    class _Function(function):  # type: ignore[misc,valid-type]
        _flags_ = cdecl
        _restype_ = _Int

    found: Callable[..., int] = _Function(dlsym(dlopen(None), "prctl"))  # type: ignore[arg-type]
    return found


def new_exec_id() -> str:
    """A fresh marker for one command."""
    return os.urandom(8).hex()  # secrets.token_hex's source, without importing random


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        with (
            contextlib.suppress(OSError, ValueError),
            open(f"/proc/{pid}/task/{tid}/children", "rb") as f,
        ):
            found.extend(int(c) for c in f.read().split())
    return found


def _descendants(roots: Iterable[int]) -> set[int]:
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        pid = todo.pop()
        for child in _children(pid):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def _marked(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read().split(b"\0")
    except OSError:
        return False  # gone, or not ours to read


def command_processes(exec_id: str, shell_pid: int | None) -> set[int]:
    """Every live process of one command except its shell (see the module doc): the
    shell's descendants (pass ``shell_pid`` only while the shell is alive and unreaped,
    so its pid cannot have been reused), and every process below us carrying the
    command's marker, with their descendants."""
    marker = f"{EXEC_ID_VAR}={exec_id}".encode()
    me = os.getpid()
    marked = {p for p in _descendants([me]) if p != shell_pid and _marked(p, marker)}
    found = marked | _descendants(marked)
    if shell_pid is not None:
        found |= _descendants([shell_pid])
    found.discard(me)
    if shell_pid is not None:
        found.discard(shell_pid)
    return found


def signal_all(pids: Iterable[int], sig: signal.Signals) -> None:
    """Send ``sig`` to each pid that still exists."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def terminate_command(pgid: int, exec_id: str, shell_pid: int | None) -> set[int]:
    """The first step of stopping a command: SIGTERM to its process group and to the
    processes of it that left the group (found while the shell still lives — pass
    ``shell_pid`` as for :func:`command_processes` — so its subtree is intact). Returns
    those processes, for :func:`kill_command` after the grace."""
    escaped = command_processes(exec_id, shell_pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGTERM)
    signal_all(escaped, signal.SIGTERM)
    return escaped


def kill_command(pgid: int, exec_id: str, escaped: set[int]) -> set[int]:
    """The second step, once the grace after :func:`terminate_command` has passed:
    SIGKILL to the group (``killpg`` reaches its members even after the leader exited,
    as long as the group exists) and to every process of the command outside it, looked
    up again (one may have forked or been orphaned meanwhile). Returns every process
    killed outside the group: the orphans among them are ours to reap
    (:func:`reap_killed`)."""
    killed = set(escaped)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    for _ in range(3):
        more = command_processes(exec_id, None) - killed
        killed |= more
        signal_all(killed, signal.SIGKILL)
        if not more:
            break
    return killed


#: Adopted processes of our commands that were left running (a daemon started on
#: purpose, its output redirected): reaped once they exit, so a long-lived host does not
#: collect zombies.
_left_running: set[int] = set()


def reap_exited(pids: Iterable[int]) -> None:
    """Reap those of ``pids`` (and of earlier left-running ones) that are our children
    and have exited; remember the ones still running. Only ever called with processes
    of our commands other than their shells (asyncio reaps a shell), so nothing another
    part of this process waits for is taken from it."""
    running: set[int] = set()
    for pid in set(pids) | _left_running:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            continue  # not our child (its parent lives and reaps it), or reaped already
        if done == 0:
            running.add(pid)
    _left_running.clear()
    _left_running.update(running)


def reap_killed(pids: Iterable[int]) -> None:
    """Wait for killed processes that are our children (adopted orphans) and reap them
    (blocking: run it in a thread; SIGKILLed processes exit promptly). Twice: a process
    whose parent was killed with it becomes our child only once that parent is gone."""
    todo = set(pids)
    for _ in range(2):
        for pid in list(todo):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
                todo.discard(pid)


def ended_sandbox_inits(exec_id: str) -> list[int]:
    """Our children that are the init (pid 1) of a bubblewrap sandbox whose bwrap has
    exited (we adopted it then), unless it is alive and belongs to another command.
    bwrap reports its command's exit before that init is gone; once the init is killed
    and reaped (``_spawn.kill_and_reap``), the kernel has killed every process of the
    sandbox's PID namespace."""
    marker = f"{EXEC_ID_VAR}={exec_id}".encode()
    found: list[int] = []
    for pid in _children(os.getpid()):
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                status = f.read()
        except OSError:
            continue
        nspid = next((ln.split()[1:] for ln in status.splitlines() if ln.startswith(b"NSpid:")), [])
        if len(nspid) < 2 or nspid[-1] != b"1":
            continue  # not the init of a PID namespace below ours
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().split(b"\0")
        except OSError:
            environ = []
        if environ and environ != [b""] and marker not in environ:
            continue  # alive, another command's: its own teardown ends it
        found.append(pid)  # ours, or exiting / a zombie: its command has ended
    return found


def below_children(pid: int) -> set[int]:
    """The processes below the children of ``pid`` (for a sandbox: below bwrap and its
    PID namespace's init, i.e. the command itself)."""
    return _descendants(_children(pid))
