"""``Session.refresh()`` of a JSONL reader: it reads only what was appended since, and
afterwards reads exactly what a reader opened from scratch reads — whatever mix of
session commits, side-file commits, retirements and new lifetimes of a scope id came
in between; a record still being written is left for a later refresh."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.storage import (
    Session,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
    open_repository,
    retire_scope,
    set_value,
    value,
)

SCOPES = [ephemeral_scope(f"op{i}") for i in range(3)]

step = st.one_of(
    st.tuples(st.just("entry"), st.integers(0, 9)),
    st.tuples(st.just("list"), st.integers(0, 2), st.integers(0, 9)),
    st.tuples(st.just("value"), st.integers(0, 2), st.integers(0, 9)),
    st.tuples(st.just("retire"), st.integers(0, 2)),
    st.tuples(st.just("refresh")),
)


async def _view(s: Session) -> dict[str, Any]:
    scopes = await s.live_scopes()
    view: dict[str, Any] = {
        "entries": [(e.seq, e.value) for e in await s.read_entries()],
        "scopes": [sc.id for sc in scopes],
        "next_seq": s.next_seq,
    }
    for sc in SCOPES:
        view[sc.id] = (
            [(e.seq, e.value, e.tag) for e in await s.read_list(list_address("ns", "l", sc))],
            await s.get_value(value("ns", "v", sc)),
            await s.scan_values("ns", "", sc),
        )
    return view


async def _run(directory: Path, steps: list[tuple[Any, ...]]) -> None:
    url = f"jsonl:{directory}"
    writer_repo, reader_repo = open_repository(url), open_repository(url, read_only=True)
    try:
        writer = await writer_repo.open_session("s", create=True)
        await writer.commit([append_entry("start")])
        reader = await reader_repo.open_session("s")
        for item in [*steps, ("refresh",)]:
            kind = item[0]
            if kind == "entry":
                await writer.commit([append_entry(item[1])])
            elif kind == "list":
                scope = SCOPES[item[1]]
                tag = "base" if item[2] % 3 == 0 else None
                await writer.commit([append_list(list_address("ns", "l", scope), item[2], tag=tag)])
            elif kind == "value":
                await writer.commit([set_value(value("ns", "v", SCOPES[item[1]]), item[2])])
            elif kind == "retire":
                await writer.commit([retire_scope(SCOPES[item[1]])])
            else:
                await reader.refresh()
                fresh_repo = open_repository(url, read_only=True)
                try:
                    fresh = await fresh_repo.open_session("s")
                    assert await _view(reader) == await _view(fresh)
                finally:
                    await fresh_repo.close()
    finally:
        await writer_repo.close()
        await reader_repo.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=30))
def test_a_refreshed_reader_reads_what_a_new_reader_reads(steps: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(_run(Path(tmp), steps))


async def test_a_record_still_being_written_waits_for_the_next_refresh(tmp_path: Path) -> None:
    url = f"jsonl:{tmp_path}"
    writer_repo, reader_repo = open_repository(url), open_repository(url, read_only=True)
    try:
        writer = await writer_repo.open_session("s", create=True)
        await writer.commit([append_entry("one")])
        reader = await reader_repo.open_session("s")
        main = tmp_path / "s.jsonl"
        before = main.stat().st_size
        await writer.commit([append_entry("two")])
        whole = main.read_bytes()
        line = whole[before:]
        # The writer is half-way through its append: the file ends in part of the line.
        with open(main, "r+b") as f:
            f.truncate(before + len(line) // 2)
        await reader.refresh()
        assert [e.value for e in await reader.read_entries()] == ["one"]
        assert reader.next_seq == 2
        with open(main, "ab") as f:  # the rest of the append lands
            f.write(line[len(line) // 2 :])
        await reader.refresh()
        assert [e.value for e in await reader.read_entries()] == ["one", "two"]
        assert reader.next_seq == 3
        # A writer's own session needs no refresh: it is a no-op there.
        await writer.refresh()
        assert [e.value for e in await writer.read_entries()] == ["one", "two"]
    finally:
        await writer_repo.close()
        await reader_repo.close()
