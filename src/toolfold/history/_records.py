"""The per-call records hosts keep beside a session's calls (``toolfold run``,
``toolfold serve``): what to write when a command starts and when it settles, where,
and whether the process that wrote one still runs.

Imports no event loop, no harness and no durability layer: a host that drives a command
without asyncio builds the same records."""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

from toolfold._fsperm import open_owned_dir
from toolfold._host import hostname
from toolfold.storage import SESSION, ValueAddress, set_value, value

RUN_RECORD_NAMESPACE = "cli.run"
"""Session-scope values written per command a host runs (``toolfold run``, ``toolfold
serve``): command, process, spill directory, keyed by tool call id. The name predates
the server and is kept: stores written by earlier versions use it."""


def run_record_address(tool_call_id: str) -> ValueAddress[Any]:
    """Where a host keeps what it knows about one command it ran."""
    return value(RUN_RECORD_NAMESPACE, tool_call_id, SESSION)


def new_run_record(command: str, spill_dir: str, started_at: str) -> dict[str, Any]:
    """The record of a command about to start (this process is its owner)."""
    return {
        "command": command,
        "pid": os.getpid(),
        "host": hostname(),
        "spill_dir": spill_dir,
        "started_at": started_at,
    }


def run_record(tool_call_id: str, command: str, spill_dir: str, started_at: str) -> Any:
    """The write that records a command before it starts (owner process included,
    so ``resume`` can refuse to settle a call whose process is still alive)."""
    return set_value(
        run_record_address(tool_call_id), new_run_record(command, spill_dir, started_at)
    )


def mark_activity(spill_dir: str | os.PathLike[str]) -> None:
    """Say that a call starts in the session whose spill directory this is: the
    directory is created and its modification time set to now. The viewer's landing
    page orders sessions by that time — one ``stat`` per session instead of a read of
    every session in the store.

    The directory is made and judged exactly as the exec env makes it for spill files
    (``toolfold._fsperm.open_owned_dir``: ``spill/`` and ``spill/<session>/`` are never a
    symbolic link, never another user's), and touched through the descriptor that
    check opened. Best effort: a directory that cannot be made, or that the rule
    refuses, is left as it is (nothing is created or touched through it) and only the
    order goes stale; the spill file's own check then refuses the call's output if it
    needs a spill file there."""
    try:
        fd = open_owned_dir(spill_dir)
    except OSError:  # UnsafePathError included
        return
    try:
        os.utime(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def settled_record(tool_call_id: str, record: Mapping[str, Any], state: Mapping[str, Any]) -> Any:
    """The write that completes ``record`` once the call settled: the output's
    ``truncation`` totals, ``spill_path`` and ``ended_at`` (now, UTC, ISO 8601).

    A ``ToolResultMessage`` keeps only what the model sees (content, details), and the
    operation scope holding the live state is retired at settlement; this record is how
    a reader of the store can still say "showing N of M lines / full output at PATH".
    It is written after settlement (not in the same transaction): a crash in between
    only loses that indicator, never the result.
    """
    done = dict(record)
    done["ended_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")
    if state.get("truncation") is not None:
        done["truncation"] = state["truncation"]
    if isinstance(state.get("spill_path"), str):
        done["spill_path"] = state["spill_path"]
    return set_value(run_record_address(tool_call_id), done)


def process_alive(record: Any) -> bool:
    """Whether the process that recorded ``record`` still runs on this host.

    A pid can be reused after its process died; a false "alive" only makes ``resume``
    refuse (safe), never settles a call that still runs.
    """
    if not isinstance(record, dict) or record.get("host") != hostname():
        return False
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie has ended: only its parent has not collected it yet (a detached run's
    # process belongs to init, which may take a moment).
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


__all__ = [
    "RUN_RECORD_NAMESPACE",
    "mark_activity",
    "new_run_record",
    "process_alive",
    "run_record",
    "run_record_address",
    "settled_record",
]
