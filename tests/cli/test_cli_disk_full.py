"""A disk that fills up during `toolfold run` or under `toolfold serve`: one line of
error, nothing committed is lost, `resume` settles the call once there is space again.
On a real (tmpfs) disk."""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path

import httpx
import pytest
from cli_helpers import AUTH, TOOLFOLD, LineReader, serve, toolfold, wait_for

from tmpfs_fixture import small_tmpfs

MARK = "written-before-the-disk-filled"


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "ExceptionGroup" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("toolfold: error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_disk_full_mid_run_is_one_line_keeps_the_output_and_resume_settles(
    tmp_path: Path, kind: str
) -> None:
    with small_tmpfs(tmp_path / "mnt", size="8m") as mnt:
        (mnt / "store").mkdir()  # an explicit store's directory is the user's to make
        url = f"sqlite:{mnt}/store/t.db" if kind == "sqlite" else f"jsonl:{mnt}/store"
        show = " ".join(shlex.quote(a) for a in [*TOOLFOLD, "show", "s", "1", "--store", url])
        # The command prints its mark, waits (a bounded poll, through a reader that
        # takes no lock) until a checkpoint holding it is committed, then fills the disk
        # and prints more (15 KB), which can no longer be recorded.
        command = (
            f"echo {MARK}; "
            f"for i in $(seq 1 100); do {show} 2>/dev/null | grep -q {MARK} && break; done; "
            f"head -c 64M /dev/zero > {mnt}/filler 2>/dev/null; "
            # More than the slack in the store files' last pages, less than the window.
            "seq -f 'after the disk filled %g' 1 1500"
        )
        done = toolfold("run", "--session", "s", "--store", url, "--", command, cwd=tmp_path)
        line = one_error_line(done.stderr)
        assert done.returncode == 2, done.stderr
        assert "could not record the end of call" in line, line
        assert "left unsettled" in line and "toolfold resume s --store" in line, line
        if kind == "sqlite":
            assert "the disk is full" in line, line
        else:
            assert "No space left on device" in line, line

        # With 0 bytes free, reading is never a "corrupt store" diagnosis.
        shown = toolfold("show", "s", "1", "--store", url, cwd=tmp_path)
        assert "corrupt" not in shown.stderr, shown.stderr
        if shown.returncode != 0:  # SQLite may be unable to map its -shm file
            assert kind == "sqlite" and "the disk is full" in one_error_line(shown.stderr)
        else:
            assert MARK in shown.stdout, (shown.stdout, shown.stderr)

        (mnt / "filler").unlink()
        shown = toolfold("show", "s", "1", "--store", url, cwd=tmp_path)
        assert shown.returncode == 0 and MARK in shown.stdout, shown.stderr
        assert "not settled" in shown.stderr
        resumed = toolfold("resume", "s", "--store", url, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert "settled from its last checkpoint as interrupted" in resumed.stdout
        settled = toolfold("show", "s", "1", "--store", url, cwd=tmp_path)
        assert settled.returncode == 0, settled.stderr
        assert settled.stdout.startswith(MARK) and "interrupted" in settled.stdout
        assert "settled, interrupted" in settled.stderr


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_disk_full_under_serve_is_one_log_line_and_resume_settles(
    tmp_path: Path, kind: str
) -> None:
    with small_tmpfs(tmp_path / "mnt", size="8m") as mnt:
        (mnt / "store").mkdir()
        url = f"sqlite:{mnt}/store/t.db" if kind == "sqlite" else f"jsonl:{mnt}/store"
        proc, base = serve(url, tmp_path)
        err = LineReader(proc.stderr)
        try:
            command = (
                f"echo {MARK}; head -c 64M /dev/zero > {mnt}/filler 2>/dev/null; "
                "seq -f 'after the disk filled %g' 1 1500"
            )
            posted = httpx.post(
                f"{base}/v1/lanes/l1/commands", json={"command": command}, headers=AUTH, timeout=30
            )
            assert posted.status_code == 202, posted.text
            call_id = posted.json()["tool_call_id"]
            wait_for(lambda: err.has("could not be recorded"), "the store error", proc=proc)
            # The server goes on: a command it cannot record is refused with the reason.
            refused = httpx.post(
                f"{base}/v1/lanes/l2/commands", json={"command": "true"}, headers=AUTH, timeout=30
            )
            assert refused.status_code == 503, refused.text
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        assert proc.returncode == 0
        stderr = err.text()
        assert "Traceback" not in stderr and "ExceptionGroup" not in stderr, stderr
        [line] = [x for x in stderr.splitlines() if call_id in x]
        assert "in lane l1 could not be recorded" in line, line
        assert "left unsettled" in line and "`toolfold resume l1` on this store" in line, line

        (mnt / "filler").unlink()
        resumed = toolfold("resume", "l1", "--store", url, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert "settled from its last checkpoint as interrupted" in resumed.stdout


def test_only_a_group_of_storage_errors_becomes_the_one_line_store_error() -> None:
    from toolfold.storage import BackendError, storage_failure

    full = BackendError("cannot append to f (No space left on device)")
    assert storage_failure(full) is full
    assert storage_failure(ExceptionGroup("g", [full])) is full
    assert storage_failure(ExceptionGroup("g", [ExceptionGroup("inner", [full])])) is full
    # Anything else is a bug and keeps its traceback.
    assert storage_failure(ExceptionGroup("g", [full, ValueError("bug")])) is None
    assert storage_failure(ExceptionGroup("g", [ValueError("bug")])) is None
    assert storage_failure(ValueError("bug")) is None
