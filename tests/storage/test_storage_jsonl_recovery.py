"""Crash anywhere, reopen, compare: a property test of JSONL recovery.

A random history of commits (session and two ephemeral scopes, retirements, id reuse)
runs against a JSONL session; the files are snapshotted after every commit. A crash is
then simulated at commit k — either mid-write (the appended line cut at a random byte)
or after the line but before the retirement's unlink — and the reopened session must
show exactly the state observed before (torn) or after (unlink pending) that commit,
and accept the next commit with a fresh seq.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.storage import (
    SESSION,
    FsyncPolicy,
    Scope,
    Session,
    Write,
    append_entry,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._jsonl import JsonlRepository

SCOPES: list[Scope] = [SESSION, ephemeral_scope("a"), ephemeral_scope("b/é")]
KEYS = ["k1", "k2"]


def scope_writes(scope: Scope) -> st.SearchStrategy[Write]:
    key = st.sampled_from(KEYS)
    payload = st.integers(0, 99) | st.text(max_size=6)
    options: list[st.SearchStrategy[Write]] = [
        st.builds(lambda k, v: set_value(value("n", k, scope), v), key, payload),
        st.builds(lambda k: delete_value(value("n", k, scope)), key),
        st.builds(
            lambda k, v, t: append_list(list_address("n", k, scope), v, t),
            key,
            payload,
            st.none() | st.just("base"),
        ),
        st.builds(lambda k: delete_list(list_address("n", k, scope)), key),
    ]
    if scope == SESSION:
        options.append(st.builds(append_entry, payload))
        options.append(st.sampled_from([retire_scope(s) for s in SCOPES[1:]]))  # type: ignore[arg-type]
    return st.one_of(options)


transaction = st.sampled_from(SCOPES).flatmap(
    lambda s: st.lists(scope_writes(s), min_size=1, max_size=3)
)


async def observe(s: Session) -> dict[str, Any]:
    out: dict[str, Any] = {"next_seq": s.next_seq, "live": await s.live_scopes()}
    out["entries"] = await s.read_entries()
    for scope in SCOPES:
        out[f"v {scope!r}"] = await s.scan_values("n", "", scope)
        for k in KEYS:
            out[f"l {scope!r} {k}"] = await s.read_list(list_address("n", k, scope))
    return out


def snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def restore(root: Path, files: dict[Path, bytes]) -> None:
    for p in [p for p in root.rglob("*") if p.is_file()]:
        if p not in files:
            p.unlink()
    for p, data in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


async def run(history: list[list[Write]], k: int, mode: str, cut_fraction: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        policy = FsyncPolicy(main="none", side="none")
        repo = JsonlRepository(root, fsync=policy)
        s = await repo.create_session("s")
        snaps = [snapshot(root)]
        seen = [await observe(s)]
        for txn in history:
            await s.commit(txn)
            snaps.append(snapshot(root))
            seen.append(await observe(s))
        await repo.close()

        before, after = snaps[k - 1], snaps[k]
        if mode == "torn":
            grown = [p for p in after if after[p] != before.get(p)]
            assert len(grown) == 1  # one transaction appends to exactly one file
            (path,) = grown
            old = before.get(path)
            if old is None:  # a side file created by this commit: the header is atomic
                old = after[path][: after[path].index(b"\n") + 1]
            line = after[path][len(old) :]
            files = dict(before)
            files[path] = old + line[: int(len(line) * cut_fraction)]
            expected = seen[k - 1]
        else:  # the line landed, the retirement's unlinks did not happen
            files = {**before, **after}
            expected = seen[k]
        restore(root, files)

        repo = JsonlRepository(root, fsync=policy)
        s = await repo.open_session("s")
        assert await observe(s) == expected
        r = await s.commit([append_entry("after the crash")])
        assert r.seqs == (expected["next_seq"],)
        await repo.close()
        repo = JsonlRepository(root, fsync=policy)
        s = await repo.open_session("s")
        assert (await s.read_entries())[-1].value == "after the crash"
        assert await s.live_scopes() == expected["live"]
        await repo.close()


@settings(max_examples=60, deadline=None)
@given(
    history=st.lists(transaction, min_size=1, max_size=12),
    data=st.data(),
    mode=st.sampled_from(["torn", "unlink pending"]),
    cut_fraction=st.floats(0, 1, exclude_max=True),
)
def test_crash_at_any_commit_recovers_a_committed_state(
    history: list[list[Write]], data: st.DataObject, mode: str, cut_fraction: float
) -> None:
    k = data.draw(st.integers(1, len(history)), label="crash at commit")
    asyncio.run(run(history, k, mode, cut_fraction))
