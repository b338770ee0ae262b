"""A bare ``toolfold run -- COMMAND`` on the direct driver (no asyncio, no harness)
writes the same durable records, and prints the same, as the asyncio path (forced with
an option, ``--retain tail``, which is the default)."""

from __future__ import annotations

import json
import re
import shlex
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import TOOLFOLD, clean_env, toolfold

from tmpfs_fixture import small_tmpfs

SHOW = " ".join(shlex.quote(a) for a in [*TOOLFOLD, "show"])

INTERLEAVED = "echo out; echo err >&2; echo out2; echo err2 >&2"
"""stdout and stderr are two pipes, read as they become readable (on both paths): which
of two lines written a moment apart to each is read first is the scheduler's choice."""

CHECKPOINTED = (
    "echo first; s=$(ls .toolfold/spill); "
    "for i in $(seq 1 200); do "
    f'{SHOW} "$s" 1 2>/dev/null | grep -q first && {{ echo seen; break; }}; done; echo last'
)
"""A command that runs until a checkpoint holding its first line is committed (it reads
the store the way a user would, a bounded poll) and says so: the same output on both
paths only if both checkpoint while it runs (a short interval, read by both paths)."""

TAKEOVER = (
    "import sqlite3, time\n"
    "from pathlib import Path\n"
    "from toolfold.durability import LeaseTerms\n"
    "from toolfold.storage import FsyncPolicy\n"
    "from toolfold.storage._sqlite_sync import SqliteFile, SyncSqliteSession\n"
    "db = Path('.toolfold/toolfold.db')\n"
    "with sqlite3.connect(db) as conn:\n"
    '    session, op = conn.execute("SELECT session, key FROM kv_values "\n'
    "        \"WHERE namespace = 'lease.token'\").fetchone()\n"
    "s = SyncSqliteSession.open(SqliteFile(db, fsync=FsyncPolicy(), read_only=False), session)\n"
    "writes, first = LeaseTerms(op, 'other-host:1', 2, ttl=30, clock=time.time).take_writes()\n"
    "s.commit(writes, expect=[first])\n"
    "s.close()\n"
)
"""Another host takes the call's lease over while the command runs (as ``toolfold
resume`` on another machine would once the lease looked expired): the settlement is
refused on both paths with the same FencedError, "this host lost its lease"."""

LEASE_LOST = f"{shlex.quote(sys.executable)} -c {shlex.quote(TAKEOVER)}"

COMMANDS = [
    "true",
    "false",
    "exit 3",
    "printf 'a\\nb\\nc\\n'",
    INTERLEAVED,
    "printf 'bad \\377\\376 bytes\\n'",
    "kill -9 $$",
    "sleep 30 & echo hi",  # what it left holding the pipes is stopped after a grace
    "seq 1 3000",  # past the window's 2,000 lines: spilled
    CHECKPOINTED,
    LEASE_LOST,
]


def _dump(db: Path) -> dict[str, Any]:
    conn = sqlite3.connect(db)
    try:
        out: dict[str, Any] = {}
        for table in ("kv_values", "list_elements", "entries", "retirements"):
            cols = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            rows = conn.execute(f"SELECT * FROM {table} ORDER BY seq").fetchall()
            out[table] = [dict(zip(cols, r, strict=True)) for r in rows]
        return out
    finally:
        conn.close()


def _normal(text: str, root: Path) -> str:
    ids: dict[str, str] = {}
    text = text.replace(str(root), "<root>")
    text = re.sub(
        r"(?:call|run)-[0-9a-f]{12}|run-\d{8}-\d{6}-[0-9a-f]{4}|exec-\w+-\d+-[0-9a-f]{12}",
        lambda m: ids.setdefault(m.group(0), f"<id{len(ids)}>"),
        text,
    )
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+\+00:00", "<time>", text)
    text = re.sub(r'(\\?"(?:pid|expires|heartbeat)\\?"): ?[\d.]+', r"\1: <n>", text)
    text = re.sub(r"[\w.-]+:\d+(\\?[\"'])", r"<host>\1", text)
    return re.sub(r"\d+\.\d s", "<s> s", text)


def _run(
    root: Path, command: str, *, direct: bool, interval: str = "0.05"
) -> tuple[int, str, str, str]:
    root.mkdir(exist_ok=True)
    env = clean_env()
    env["TOOLFOLD_TEST_CHECKPOINT_INTERVAL"] = interval
    options: list[str] = []
    if direct:
        env["TOOLFOLD_DIRECT_RUN"] = "1"
    else:
        options = ["--retain", "tail"]
    proc = toolfold("run", *options, "--", command, cwd=root, env=env)
    dump = _dump(root / ".toolfold" / "toolfold.db")
    if command == CHECKPOINTED:
        # How many checkpoints (and so which seqs) a run makes depends on timing.
        dump = {
            table: [{k: v for k, v in row.items() if k != "seq"} for row in rows]
            for table, rows in dump.items()
        }
    store = json.dumps(dump, indent=1, sort_keys=True)
    return (
        proc.returncode,
        _normal(proc.stdout, root),
        _normal(proc.stderr, root),
        _normal(store, root),
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_the_direct_path_writes_and_prints_what_the_asyncio_path_does(
    tmp_path: Path, command: str
) -> None:
    # The takeover's own interpreter runs for longer than the short interval: no paced
    # checkpoint there, whose count would depend on timing (the settlement is refused).
    interval = "3600" if command == LEASE_LOST else "0.05"
    direct = _run(tmp_path / "direct", command, direct=True, interval=interval)
    forced = _run(tmp_path / "asyncio", command, direct=False, interval=interval)
    assert direct[0] == forced[0]
    if command == INTERLEAVED:
        for printed in (direct[1], forced[1]):
            lines = printed.splitlines()
            assert sorted(lines) == ["err", "err2", "out", "out2"]
            assert lines.index("out") < lines.index("out2")
            assert lines.index("err") < lines.index("err2")
        return
    assert direct[1] == forced[1]
    if command == CHECKPOINTED:
        assert direct[1] == "first\nseen\nlast\n"
    if command == LEASE_LOST:
        assert direct[0] == 2
        assert (
            "refused: it carries fencing token 1, but the stored token is 2 (held by "
            in (direct[2])
            and "this host lost its lease and must stop working on the operation" in direct[2]
        )
        # The call is the other host's to settle: no `toolfold resume` here.
        assert "other-host:1 holds it now and settles it" in direct[2]
        assert "toolfold resume" not in direct[2]
    assert direct[2].splitlines() == forced[2].splitlines()
    assert direct[3] == forced[3]


@pytest.mark.parametrize("how", ["spill directory unusable", "disk full while spilling"])
def test_a_spill_that_fails_ends_alike_on_both_paths(tmp_path: Path, how: str) -> None:
    """The spill file cannot be created (its directory is a file), or the disk fills
    up while it is written (a 4 MiB tmpfs mounted as the spill directory, which another
    process then fills): both drivers settle the call alike. The first fails the call
    and stops the command (it would sleep, its output written at once); the second keeps the command running and
    the spill file holds what fit, which depends on timing (the sizes are masked)."""
    runs = []
    for name, direct in (("direct", True), ("asyncio", False)):
        home = tmp_path / name / ".toolfold"
        home.mkdir(parents=True, mode=0o700)
        if how == "spill directory unusable":
            (home / "spill").write_bytes(b"")
            # One write of all of it, then a wait: what is read before the stop does not
            # depend on how soon each driver reacts.
            command = "seq 1 3000 > lines; cat lines; sleep 30"
            runs.append(_run(tmp_path / name, command, direct=direct))
            continue
        with small_tmpfs(home / "spill", size="4m"):
            # The filler starts once the first part (588,895 bytes) is in the spill file
            # (a bounded poll): otherwise a driver slower to start its spill finds the
            # disk already full and refuses the spill up front, a different ending. The
            # path is relative (the run's directory), so both commands are the same text.
            mnt = ".toolfold/spill"
            command = (
                "seq 1 100000; for i in $(seq 1 2000); do "
                f'[ "$(cat {mnt}/*/*.log 2>/dev/null | wc -c)" -ge 588895 ] && break; '
                f"sleep 0.01; done; cat /dev/zero > {mnt}/filler 2>/dev/null; seq 1 100000"
            )
            # No paced checkpoint: how many a run of this length makes depends on timing.
            run = _run(tmp_path / name, command, direct=direct, interval="3600")
        kept = re.compile(r"(the first |\\?\"spill_bytes\\?\": ?)[\d.,]+( B| [KM]iB)?")
        runs.append((run[0], *(kept.sub(r"\1<size>", text) for text in run[1:])))
    direct_run, forced = runs
    assert direct_run[0] == forced[0] == (1 if how == "spill directory unusable" else 0)
    assert direct_run[1] == forced[1]
    assert direct_run[2].splitlines() == forced[2].splitlines()
    assert direct_run[3] == forced[3]
    if how == "spill directory unusable":
        assert (
            "SpillError: cannot create spill directory '<root>/.toolfold/spill/" in (direct_run[1])
        )
    else:
        assert "(the first <size> only: the disk filled up)]" in direct_run[1]
