"""The ledger of background commands: what a dead owner left running is killed, a live
owner's commands are not, and a planted ledger (a symbolic link) is not read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from toolfold.execenv import stop_orphans
from toolfold.execenv._ledger import LEDGER_NAME, read_ledger, start_time, write_ledger


def marked_sleep(exec_id: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["sleep", "1000"], env={**os.environ, "TOOLFOLD_EXEC_ID": exec_id}, start_new_session=True
    )


def entry(exec_id: str, owner_pid: int, owner_start: str | None) -> dict[str, object]:
    return {
        "handle": "bg-1",
        "command": "sleep 1000",
        "pid": 0,
        "exec_id": exec_id,
        "owner_pid": owner_pid,
        "owner_start": owner_start,
    }


def test_a_dead_owners_command_is_killed_and_a_live_owners_is_not(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    dead_id, live_id = os.urandom(8).hex(), os.urandom(8).hex()
    orphan, owned = marked_sleep(dead_id), marked_sleep(live_id)
    try:
        # A dead owner: a pid with another start time than the one recorded.
        write_ledger(
            spill,
            [
                {**entry(dead_id, os.getpid(), "0"), "tag": "call-1.bg-1"},
                entry(live_id, os.getpid(), start_time(os.getpid())),
            ],
        )
        assert (spill / LEDGER_NAME).stat().st_mode & 0o777 == 0o600
        [report] = stop_orphans(spill)
        assert report.killed == (orphan.pid,) and report.handle == "bg-1"
        assert report.tag == "call-1.bg-1"
        assert orphan.wait(timeout=60) == -signal.SIGKILL
        assert owned.poll() is None
        assert [e["exec_id"] for e in read_ledger(spill)] == [live_id]
        assert stop_orphans(spill) == []
    finally:
        for p in (orphan, owned):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_ledger_planted_as_a_symlink_is_not_read(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    spill.mkdir(mode=0o700)
    victim_id = os.urandom(8).hex()
    victim = marked_sleep(victim_id)
    try:
        planted = tmp_path / "planted.json"
        planted.write_text(json.dumps([entry(victim_id, 1, "0")]))
        (spill / LEDGER_NAME).symlink_to(planted)
        assert read_ledger(spill) == []
        assert stop_orphans(spill) == []
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
