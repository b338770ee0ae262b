"""SIGKILL a process that is committing to a JSONL session, then reopen: every commit
that returned is there, nothing is half there, and the session takes the next commit."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from toolfold.storage import (
    append_entry,
    ephemeral_scope,
    list_address,
    value,
)
from toolfold.storage._jsonl import JsonlRepository

# The child commits forever: per operation 7 checkpoints (list append + memo, one
# transaction in the operation's scope), then a settlement (entry + retirement). It
# prints one acknowledgement line after each commit() returned.
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from toolfold.storage import *
    from toolfold.storage._jsonl import JsonlRepository

    async def main(directory):
        repo = JsonlRepository(directory)
        s = await repo.open_session("s", create=True)
        i = 0
        while True:
            op = ephemeral_scope(f"op{i // 8}")
            if i % 8 < 7:
                pending = list_address("pending", "out", op)
                r = await s.commit([
                    append_list(pending, {"i": i, "pad": "x" * (i * 37 % 3000)},
                                tag="base" if i % 8 == 0 else None),
                    set_value(value("memo", "last", op), i),
                ])
                print("cp", i, r.last_seq, flush=True)
            else:
                r = await s.commit([append_entry({"settled": i // 8}), retire_scope(op)])
                print("settle", i // 8, r.last_seq, flush=True)
            i += 1

    asyncio.run(main(sys.argv[1]))
    """
)


async def check(directory: Path, acked_cp: list[int], acked_settle: list[int]) -> None:
    repo = JsonlRepository(directory)
    s = await repo.open_session("s")
    try:
        settled = [e.value["settled"] for e in await s.read_entries()]  # type: ignore[index,call-overload]
        assert settled[: len(acked_settle)] == acked_settle  # every acked settlement
        assert settled == list(range(len(settled)))  # and nothing out of order
        live = await s.live_scopes()
        for op in settled:
            assert ephemeral_scope(f"op{op}") not in live
        # the operation in flight: its checkpoints form an unbroken prefix that holds
        # every acknowledged one
        current = len(settled)
        got = [
            el.value["i"]  # type: ignore[index,call-overload]
            for el in await s.read_list(
                list_address("pending", "out", ephemeral_scope(f"op{current}"))
            )
        ]
        assert got == list(range(current * 8, current * 8 + len(got)))
        assert all(i in got for i in acked_cp if i // 8 == current)
        memo = await s.get_value(value("memo", "last", ephemeral_scope(f"op{current}")))
        assert memo == (got[-1] if got else None)  # memo and checkpoint committed together
        high = s.next_seq
        r = await s.commit([append_entry({"settled": current})])
        assert r.seqs == (high,)
    finally:
        await repo.close()


@pytest.mark.parametrize("acks", [1, 9, 23, 61])
def test_sigkill_while_committing(tmp_path: Path, acks: int) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    acked_cp: list[int] = []
    acked_settle: list[int] = []
    try:
        assert child.stdout is not None
        for _ in range(acks):
            line = child.stdout.readline()
            assert line, f"child died early: {child.stderr.read() if child.stderr else ''}"
            kind, n, _seq = line.split()
            (acked_cp if kind == "cp" else acked_settle).append(int(n))
        child.send_signal(signal.SIGKILL)  # wherever it is: mid-write, mid-fsync, mid-unlink
    finally:
        child.kill()
        child.wait()
    assert child.returncode == -signal.SIGKILL
    asyncio.run(check(tmp_path, acked_cp, acked_settle))
