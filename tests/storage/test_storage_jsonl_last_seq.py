"""The JSONL change signal reads a file's high-water seq from its end (``_last_seq``):
the last complete line's highest seq, whatever the line's length, a torn tail of any
length ignored, every record verb counted, and 0 when no complete record line ends
the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfold.storage import (
    Write,
    append_entry,
    append_list,
    delete_value,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._jsonl import JsonlRepository, JsonlSession
from toolfold.storage._jsonl_files import _last_seq, _line_seq

HEADER = b'{"v":2,"kind":"session_header","sessionId":"0123"}\n'


async def main_log(tmp_path: Path, *batches: list[Write]) -> Path:
    repo = JsonlRepository(tmp_path)
    try:
        s = await repo.open_session("s", create=True)
        for batch in batches:
            await s.commit(batch)
        return tmp_path / "s.jsonl"
    finally:
        await repo.close()


@pytest.mark.parametrize("length", [10, 4_000, 5_000, 20_000, 70_000])
async def test_the_last_line_is_found_whatever_its_length(tmp_path: Path, length: int) -> None:
    path = await main_log(tmp_path, [append_entry("first")], [append_entry("x" * length)])
    assert _last_seq(path) == 2


@pytest.mark.parametrize("length", [10, 5_000, 20_000])
async def test_a_torn_tail_of_any_length_is_not_a_line(tmp_path: Path, length: int) -> None:
    path = await main_log(tmp_path, [append_entry("first"), append_entry("second")])
    with open(path, "ab") as f:
        f.write(b'["00000000",["e",3,"' + b"y" * length)
    assert _last_seq(path) == 2


async def test_every_verb_of_the_last_line_counts(tmp_path: Path) -> None:
    op = ephemeral_scope("op")
    v = value("ns", "k")
    cases: list[tuple[list[Write], int]] = [
        ([set_value(v, 1)], 1),
        ([append_list(list_address("ns", "l"), 1, tag="t")], 2),
        ([delete_value(v)], 3),  # three elements: ["x", ref, seq]
        ([retire_scope(op)], 4),  # three elements: ["!", ref, seq]
        ([append_entry(1, key="k", summary={"s": 1})], 5),
    ]
    repo = JsonlRepository(tmp_path)
    try:
        s = await repo.open_session("s", create=True)
        assert isinstance(s, JsonlSession)
        for batch, seq in cases:
            await s.commit(batch)
            assert _last_seq(s.main_path) == seq
            assert await repo.wait_for_change("s", 0) == seq
    finally:
        await repo.close()


def test_a_file_without_a_complete_record_line_has_seq_0(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    for data in (b"", HEADER, HEADER[:20], HEADER + b'["00000000",["e",1,'):
        path.write_bytes(data)
        assert _last_seq(path) == 0, data


def test_a_last_line_that_does_not_parse_counts_0(tmp_path: Path) -> None:
    # A partly persisted write: its end reached the disk, some blocks read back as zeros.
    path = tmp_path / "f.jsonl"
    path.write_bytes(HEADER + b'["00000000",["e",1,"a"]]\n' + b"\x00" * 20 + b"\n")
    assert _last_seq(path) == 0
    assert _line_seq(b"\x00" * 20) == 0
    assert _line_seq(b'{"kind":"scope_header"}') == 0
