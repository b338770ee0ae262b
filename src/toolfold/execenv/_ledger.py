"""The ledger of background commands: what a crashed process left running, and stopping it.

A command that went on in the background belongs to the process that started it: when
that process ends normally it stops them (``aclose``). A ``kill -9`` stops nothing: the
commands live on, re-parented to init. So ``BackgroundCommands`` keeps a small file,
``background.json`` in its spill directory (0600, written atomically, never through a
symbolic link), listing each running command with its ``TOOLFOLD_EXEC_ID`` marker and
the process that owns it. ``stop_orphans(spill_dir)`` — run by ``toolfold resume`` and
when ``toolfold mcp`` starts on the session — reads it, and for every entry whose owner
is gone kills the processes still carrying its marker, and says which.

Only processes whose environment holds the entry's random marker are signalled (so a
reused pid is never hit), and only entries of a dead owner (a live owner's pid with the
same start time is left alone).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._reaper import EXEC_ID_VAR
from ._spill import open_spill_dir

LEDGER_NAME = "background.json"
MAX_LEDGER_BYTES = 256 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True, slots=True)
class OrphanReport:
    """One background command a dead process left running, and what was done."""

    handle: str
    command: str
    owner_pid: int
    killed: tuple[int, ...]
    """Pids that still carried its marker and were sent SIGKILL (empty: it had ended)."""
    tag: str | None = None
    """What its owner tagged it with (``BackgroundCommands.follow``): the harness's id of
    the call that records its output."""


def start_time(pid: int) -> str | None:
    """The start time of ``pid`` (field 22 of ``/proc/PID/stat``), or None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(b")", 1)[-1].split()[19].decode()


def write_ledger(spill_dir: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the ledger with ``entries`` (remove it when there are none)."""
    dir_fd = open_spill_dir(spill_dir)
    try:
        if not entries:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(LEDGER_NAME, dir_fd=dir_fd)
            return
        data = json.dumps(entries).encode()
        tmp = f".{LEDGER_NAME}.{os.getpid()}.{os.urandom(4).hex()}"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | _NOFOLLOW,
            0o600,
            dir_fd=dir_fd,
        )
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.rename(tmp, LEDGER_NAME, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def read_ledger(spill_dir: Path) -> list[dict[str, Any]]:
    """The ledger's entries ([] when there is none, or it is not ours or not readable)."""
    try:
        dir_fd = os.open(spill_dir, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        fd = os.open(LEDGER_NAME, os.O_RDONLY | _NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return []
    finally:
        os.close(dir_fd)
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return []
        data = os.read(fd, MAX_LEDGER_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_LEDGER_BYTES:
        return []
    try:
        entries = json.loads(data)
    except ValueError:
        return []
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _marked(exec_id: str) -> list[int]:
    marker = f"{EXEC_ID_VAR}={exec_id}".encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


def _owner_alive(entry: dict[str, Any]) -> bool:
    pid = entry.get("owner_pid")
    return isinstance(pid, int) and start_time(pid) == entry.get("owner_start")


def stop_orphans(spill_dir: Path | str) -> list[OrphanReport]:
    """Kill what dead owners left running in ``spill_dir``'s ledger; what was found."""
    spill_dir = Path(spill_dir)
    entries = read_ledger(spill_dir)
    if not entries:
        return []
    reports: list[OrphanReport] = []
    kept: list[dict[str, Any]] = []
    for entry in entries:
        exec_id = entry.get("exec_id")
        if _owner_alive(entry) or not isinstance(exec_id, str) or len(exec_id) < 16:
            kept.append(entry)
            continue
        pids = _marked(exec_id)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        reports.append(
            OrphanReport(
                handle=str(entry.get("handle")),
                command=str(entry.get("command", ""))[:200],
                owner_pid=int(entry.get("owner_pid") or 0),
                killed=tuple(pids),
                tag=tag if isinstance(tag := entry.get("tag"), str) and tag else None,
            )
        )
    if reports:
        with contextlib.suppress(OSError):
            write_ledger(spill_dir, kept)
    return reports
