"""What a damaged JSONL file is reported as, word for word: the file, the line, the byte,
what is wrong and what to do (``CorruptStoreError``'s message, ``path``, ``record`` and
``offset``), and the note a torn tail leaves on the session."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolfold.storage import (
    CorruptStoreError,
    append_entry,
    append_list,
    ephemeral_scope,
    list_address,
)
from toolfold.storage._jsonl import JsonlRepository, JsonlSession
from toolfold.storage._jsonl_files import _frame

OP = ephemeral_scope("op")
PENDING = list_address("pending", "p", OP)


class Store:
    """Session ``s``: entries 1 and 2 in the main log, seq 3 in scope ``op``'s side file."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.main = directory / "s.jsonl"
        self.side = directory / "s.jsonl.scopes" / "scope-op.scope"
        self.repos: list[JsonlRepository] = []

    async def make(self) -> None:
        s = await self.open()
        await s.commit([append_entry("one")])
        await s.commit([append_entry("two")])
        await s.commit([append_list(PENDING, "side")])
        await s.close()

    async def open(self, *, read_only: bool = False) -> JsonlSession:
        repo = JsonlRepository(self.dir, read_only=read_only)
        self.repos.append(repo)
        s = await repo.open_session("s", create=not read_only)
        assert isinstance(s, JsonlSession)
        return s

    async def refused(self, *, read_only: bool = False) -> CorruptStoreError:
        with pytest.raises(CorruptStoreError) as caught:
            await self.open(read_only=read_only)
        return caught.value

    def lines(self, path: Path) -> list[bytes]:
        return path.read_bytes().splitlines(keepends=True)

    def offset(self, path: Path, line: int) -> int:
        """The byte where 1-based ``line`` starts."""
        return sum(len(x) for x in self.lines(path)[: line - 1])


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    st = Store(tmp_path / "store")
    try:
        await st.make()
        yield st
    finally:
        for r in st.repos:
            await r.close()


def assert_error(
    e: CorruptStoreError, text: str, path: Path, record: int | None, offset: int | None
) -> None:
    assert str(e) == text
    assert (e.path, e.record, e.offset) == (str(path), record, offset)


async def test_a_file_that_does_not_start_with_its_header(store: Store) -> None:
    store.main.write_bytes(b"not a header\n" + store.main.read_bytes())
    assert_error(
        await store.refused(),
        f"{store.main}: line 1 is not a session_header line (got b'not a header\\n"
        + repr(store.main.read_bytes()[13:80])[2:-1]
        + "'); this is not a toolfold JSONL file or its start was damaged — move it away",
        store.main,
        1,
        0,
    )
    store.main.write_bytes(b"")
    e = await store.refused()
    assert str(e).startswith(f"{store.main}: line 1 is not a session_header line (got b'')")


async def test_a_side_file_whose_header_is_of_another_kind(store: Store) -> None:
    header, *rest = store.lines(store.side)
    store.side.write_bytes(header.replace(b"scope_header", b"session_header") + b"".join(rest))
    e = await store.refused()
    assert str(e).startswith(f"{store.side}: line 1 is not a scope_header line (got b'{{")
    assert (e.path, e.record, e.offset) == (str(store.side), 1, 0)


@pytest.mark.parametrize(("version", "shown"), [(b"9", "9"), (b"true", "True"), (b'"2"', "'2'")])
async def test_a_format_version_this_toolfold_does_not_read(
    store: Store, version: bytes, shown: str
) -> None:
    store.main.write_bytes(store.main.read_bytes().replace(b'"v":2', b'"v":' + version, 1))
    assert_error(
        await store.refused(),
        f"{store.main}: format version {shown} is not supported (this toolfold reads "
        "versions 1, 2); open it with the toolfold that wrote it",
        store.main,
        1,
        0,
    )


@pytest.mark.parametrize("session_id", [b"", b',"sessionId":""', b',"sessionId":7'])
async def test_a_header_without_a_session_id(store: Store, session_id: bytes) -> None:
    rest = store.lines(store.main)[1:]
    store.main.write_bytes(b'{"v":2,"kind":"session_header"' + session_id + b"}\n" + b"".join(rest))
    assert_error(
        await store.refused(),
        f"{store.main}: header has no sessionId; the file was edited — restore it",
        store.main,
        1,
        None,
    )


def rot_value(line: bytes) -> bytes:
    return line.replace(b'"one"', b'"onf"')


def rot_checksum_prefix(line: bytes) -> bytes:
    return b"{" + line[1:]  # not covered by the checksum itself


def rot_checksum_digit(line: bytes) -> bytes:
    return line[:2] + b"z" + line[3:]  # no longer a hex number


def cut_after_checksum(line: bytes) -> bytes:
    return line[:12] + b"\n"  # ["1a2b3c4d", and nothing more


def empty_after_checksum(line: bytes) -> bytes:
    return b'["00000000",\n'  # the CRC-32 of the nothing that follows


@pytest.mark.parametrize(
    "rot",
    [rot_value, rot_checksum_prefix, rot_checksum_digit, cut_after_checksum, empty_after_checksum],
)
@pytest.mark.parametrize("read_only", [False, True])
async def test_a_record_that_fails_its_checksum(store: Store, read_only: bool, rot: Any) -> None:
    ls = store.lines(store.main)
    ls[1] = rot(ls[1])
    store.main.write_bytes(b"".join(ls))
    at = store.offset(store.main, 2)
    assert_error(
        await store.refused(read_only=read_only),
        f"{store.main}: the record at byte {at} (line 2) fails its checksum: a committed "
        "record was changed on disk (bit rot, or an edit); restore the file from a backup "
        "— other sessions are not affected",
        store.main,
        2,
        at,
    )


async def test_a_checksummed_line_that_is_not_json(store: Store) -> None:
    ls = store.lines(store.main)
    ls.insert(2, _frame(b"[oops]\n"))
    store.main.write_bytes(b"".join(ls))
    at = store.offset(store.main, 3)
    e = await store.refused()
    assert str(e).startswith(f"{store.main}: line 3 (byte {at}) is not valid JSON (")
    assert str(e).endswith(
        ") and is not an interrupted write, so it is damage; restore the file or cut the "
        "line out by hand"
    )
    assert (e.path, e.record, e.offset) == (str(store.main), 3, at)


async def test_seqs_that_do_not_increase_down_a_file(store: Store) -> None:
    ls = store.lines(store.main)
    ls.append(_frame(b'[["e",2,"again"]]\n'))
    ls.append(_frame(b'[["e",9,"later"]]\n'))
    store.main.write_bytes(b"".join(ls))
    at = store.offset(store.main, 4)
    assert_error(
        await store.refused(),
        f"{store.main}: line 4 has seq 2 after seq 2; seqs in a file must increase — the "
        "file was edited or spliced",
        store.main,
        4,
        at,
    )


async def test_a_seq_in_two_files(store: Store) -> None:
    header, record = store.lines(store.side)
    store.side.write_bytes(
        header + _frame(b"[" + record[len('["01234567",') :].replace(b",3,", b",2,"))
    )
    assert_error(
        await store.refused(),
        f"seq 2 appears twice: {store.main} line 3 and {store.side} line 2; one of the "
        "files does not belong here",
        store.side,
        2,
        None,
    )


async def test_a_side_file_name_toolfold_never_gives(store: Store) -> None:
    odd = store.side.with_name("scope-%6Fp.scope")
    store.side.rename(odd)
    assert_error(
        await store.refused(),
        f"{odd}: 'scope-%6Fp.scope' is not the name toolfold gives a side file (the scope "
        "id is not canonically percent-encoded); move it out of the .scopes directory",
        odd,
        None,
        None,
    )


async def test_a_side_file_of_another_session(store: Store) -> None:
    header, *rest = store.lines(store.side)
    ours = header.split(b'"sessionId":"')[1].split(b'"')[0].decode()
    store.side.write_bytes(header.replace(ours.encode(), b"f" * 32) + b"".join(rest))
    assert_error(
        await store.refused(),
        f"{store.side}: side file belongs to session id {'f' * 32!r}, not to this session "
        f"({ours!r}); it was copied or left here from another session — move it away, then "
        "open again",
        store.side,
        1,
        None,
    )


async def test_a_renamed_side_file(store: Store) -> None:
    other = store.side.with_name("scope-op2.scope")
    store.side.rename(other)
    assert_error(
        await store.refused(),
        f"{other}: header names scope 'op' but the file name says 'op2'; the file was "
        "renamed — rename it back or move it away",
        other,
        1,
        None,
    )


async def test_a_torn_tail_is_noted_by_a_reader_and_dropped_by_the_writer(store: Store) -> None:
    good = store.main.stat().st_size
    with open(store.main, "ab") as f:
        f.write(b'["00000000",["e",4,"half')
    where = f"{store.main}: the last record, 24 bytes at byte {good}, is incomplete (a write "
    where += "that never finished, so its commit never returned): "
    reader = await store.open(read_only=True)
    assert reader.notes == (where + "ignored; the next writer drops it",)
    writer = await store.open()
    assert writer.notes == (where + "dropped (the file was cut back to the last complete record)",)
    assert store.main.stat().st_size == good


@pytest.mark.parametrize("name", ["scope-%FF.scope", "scope-.scope"])
async def test_a_side_file_name_that_decodes_to_no_scope_id(store: Store, name: str) -> None:
    odd = store.side.with_name(name)  # not UTF-8; empty
    store.side.rename(odd)
    e = await store.refused()
    assert str(e).startswith(f"{odd}: {name!r} is not the name toolfold gives a side file")
    assert e.path == str(odd)


async def test_record_lines_carry_their_checksum_as_eight_lowercase_hex_digits(
    store: Store,
) -> None:
    for path in (store.main, store.side):
        for line in store.lines(path)[1:]:
            assert re.fullmatch(rb'\["[0-9a-f]{8}",\[.*\]\]\n', line, re.S), line


async def test_a_seq_in_two_files_names_both_among_several_side_files(store: Store) -> None:
    s = await store.open()
    await s.commit([append_list(list_address("pending", "p", ephemeral_scope("zz")), "z")])
    await s.close()
    header, record = store.lines(store.side)  # scope op's file sorts before zz's
    store.side.write_bytes(
        header + _frame(b"[" + record[len('["01234567",') :].replace(b",3,", b",1,"))
    )
    assert_error(
        await store.refused(),
        f"seq 1 appears twice: {store.main} line 2 and {store.side} line 2; one of the "
        "files does not belong here",
        store.side,
        2,
        None,
    )


async def test_damage_after_a_header_only_file_counts_lines_from_the_header(
    tmp_path: Path,
) -> None:
    repo = JsonlRepository(tmp_path, read_only=False)
    reader_repo = JsonlRepository(tmp_path, read_only=True)
    try:
        await repo.create_session("s")  # the header and nothing else
        reader = await reader_repo.open_session("s")
        main = tmp_path / "s.jsonl"
        at = main.stat().st_size
        with open(main, "ab") as f:
            f.write(b'["00000000",["e",1,"x"]]\n')
        with pytest.raises(CorruptStoreError) as caught:
            await reader.refresh()
        assert str(caught.value).startswith(f"{main}: the record at byte {at} (line 2) fails")
        assert (caught.value.record, caught.value.offset) == (2, at)
    finally:
        await repo.close()
        await reader_repo.close()


async def test_a_checksummed_last_line_that_is_not_json_is_damage_not_a_torn_write(
    store: Store,
) -> None:
    with open(store.main, "ab") as f:
        f.write(_frame(b"[oops]\n"))
    at = store.offset(store.main, 4)
    e = await store.refused()
    assert str(e).startswith(f"{store.main}: line 4 (byte {at}) is not valid JSON (")
    assert (e.record, e.offset) == (4, at)


V1_HEADER = b'{"v":1,"kind":"session_header","sessionId":"0123456789abcdef"}\n'


async def test_a_version_1_file_drops_an_unparsable_last_line_and_refuses_an_inner_one(
    tmp_path: Path,
) -> None:
    main = tmp_path / "s.jsonl"
    torn = b'[["e",2,"tw\n'  # no checksum to tell: taken for a partly persisted write
    main.write_bytes(V1_HEADER + b'[["e",1,"one"]]\n' + torn)
    repo = JsonlRepository(tmp_path)
    try:
        s = await repo.open_session("s")
        assert [e.value for e in await s.read_entries()] == ["one"]
        await s.close()
        assert main.read_bytes() == V1_HEADER + b'[["e",1,"one"]]\n'  # cut back
        at = len(V1_HEADER) + 16
        main.write_bytes(V1_HEADER + b'[["e",1,"one"]]\n' + torn + b'[["e",3,"x"]]\n')
        with pytest.raises(CorruptStoreError) as caught:
            await repo.open_session("s")
        assert str(caught.value).startswith(f"{main}: line 3 (byte {at}) is not valid JSON (")
        assert (caught.value.record, caught.value.offset) == (3, at)
    finally:
        await repo.close()
