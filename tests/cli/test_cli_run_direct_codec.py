"""A store the direct driver wrote (with the standard library's json, ``toolfold._json``)
reads back through the normal path (orjson): every stored document decodes to the same
value with either codec and through the library's session reads, and ``toolfold show``
and ``toolfold resume`` recover the call from its checkpoints."""

from __future__ import annotations

import asyncio
import json
import shlex
import sqlite3
from pathlib import Path
from typing import Any

import orjson
from cli_helpers import TOOLFOLD, clean_env, pending_text, toolfold

from json_values import same
from toolfold import _json
from toolfold.storage import SESSION, list_address, open_repository, value
from toolfold.storage._addresses import encode_scope_id

SHOW = " ".join(shlex.quote(a) for a in [*TOOLFOLD, "show"])

FIRST = 'héllo wörld \x01 \x1f tab\there 😀 \u2028 "quoted" \\ back'
SHOWN = FIRST.replace("\x01", "").replace("\x1f", "")
"""The output keeps no control characters but tabs; the command (run record, arguments,
the settled entry's ``what``) keeps them all."""

# Writes a line of non-ASCII text and control characters, waits until a checkpoint that
# holds it is committed (read the way a user would, through `toolfold show`, a bounded
# poll), then kills the driver (the shell's parent) with SIGKILL: the store keeps the
# call unsettled, its start and checkpoints as the direct driver wrote them.
COMMAND = (
    f"printf '%s\\n' {shlex.quote(FIRST)}; s=$(ls .toolfold/spill); "
    "for i in $(seq 1 200); do "
    f'{SHOW} "$s" 1 2>/dev/null | grep -q wörld && break; done; kill -9 $PPID'
)


def _rows(db: Path, table: str) -> list[dict[str, Any]]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY seq")]
    finally:
        conn.close()


async def _through_the_library(url: str, session_name: str, db: Path) -> list[tuple[Any, Any]]:
    """(what the library read, what the standard library decodes from the row) for every
    value and list element the store holds."""
    repo = open_repository(url, read_only=True)
    try:
        session = await repo.open_session(session_name)
        scopes = {"": SESSION} | {encode_scope_id(s.id): s for s in await session.live_scopes()}
        pairs = []
        for row in _rows(db, "kv_values"):
            scope = scopes[row["scope_id"]]
            got = await session.get_value(value(row["namespace"], row["key"], scope))
            pairs.append((got, json.loads(row["value"])))
        for row in _rows(db, "list_elements"):
            address = list_address(row["namespace"], row["key"], scopes[row["scope_id"]])
            elements = await session.read_list(address, cursor=row["seq"] - 1, limit=1)
            pairs.append((elements[0].value, json.loads(row["value"])))
        return pairs
    finally:
        await repo.close()


def test_a_store_the_direct_driver_wrote_reads_back_equal_on_the_normal_path(
    tmp_path: Path,
) -> None:
    env = clean_env()
    env["TOOLFOLD_DIRECT_RUN"] = "1"
    env["TOOLFOLD_TEST_CHECKPOINT_INTERVAL"] = "0.05"
    killed = toolfold("run", "--", COMMAND, cwd=tmp_path, env=env)
    assert killed.returncode == -9, killed.stderr
    db = tmp_path / ".toolfold" / "toolfold.db"
    (session_name,) = {row["session"] for row in _rows(db, "kv_values")}

    documents = [
        row[column]
        for table in ("kv_values", "list_elements", "entries")
        for row in _rows(db, table)
        for column in ("value", "summary")
        if row.get(column) is not None
    ]
    assert len(documents) >= 4  # the run record, the lease, the start entry, a checkpoint
    for text in documents:
        assert same(orjson.loads(text), json.loads(text)), text

    url = f"sqlite:{db}"
    pairs = asyncio.run(_through_the_library(url, session_name, db))
    assert _json.codec_name() == "orjson"  # this process read them on the normal path
    assert any(row for row in _rows(db, "list_elements"))  # the checkpoints were read
    assert [same(got, want) for got, want in pairs] == [True] * len(pairs)
    assert any(
        FIRST in got["command"] for got, _ in pairs if isinstance(got, dict) and "pid" in got
    )
    assert (pending_text(url, session_name) or "").startswith(SHOWN)

    resumed = toolfold("resume", session_name, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "settled from its last checkpoint as interrupted" in resumed.stdout
    shown = toolfold("show", session_name, "1", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(SHOWN + "\n")
