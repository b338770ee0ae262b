"""`sessions` and `show` only read: they never truncate, repair or write a store."""

from __future__ import annotations

from pathlib import Path

from cli_helpers import toolfold


def snapshot(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def test_a_torn_jsonl_tail_is_reported_by_readers_and_left_for_the_next_writer(
    tmp_path: Path,
) -> None:
    url = f"jsonl:{tmp_path / 'j'}"
    assert (
        toolfold("run", "--store", url, "--session", "s", "--", "echo one", cwd=tmp_path).returncode
        == 0
    )
    main = tmp_path / "j" / "s.jsonl"
    main.write_bytes(main.read_bytes() + b'["00000000",["e",99,"ha')
    before = snapshot(tmp_path / "j")
    for args in (["sessions"], ["show", "s"], ["show", "s", "1"]):
        done = toolfold(*args, "--store", url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert f"toolfold: note: {main}: the last record" in done.stderr
        assert "next writer drops it" in done.stderr
        assert snapshot(tmp_path / "j") == before  # not repaired by a reader
    done = toolfold("run", "--store", url, "--session", "s", "--", "echo two", cwd=tmp_path)
    assert done.returncode == 0 and "was cut back to the last complete record" in done.stderr
    assert b'"ha' not in main.read_bytes()


def test_a_flipped_byte_in_the_last_committed_record_is_damage_not_a_torn_write(
    tmp_path: Path,
) -> None:
    url = f"jsonl:{tmp_path / 'j'}"
    for name in ("a", "b"):
        done = toolfold(
            "run", "--store", url, "--session", name, "--", f"echo {name}", cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
    main = tmp_path / "j" / "a.jsonl"
    data = bytearray(main.read_bytes())
    last = data.rindex(b"\n", 0, len(data) - 1) + 1
    assert data[last + 13] == data[last + 15] == ord('"')  # ["crc32hex",["<verb>",...
    data[last + 14] ^= 0x20  # the record's verb, e.g. "v" -> "V": still valid JSON
    main.write_bytes(bytes(data))
    shown = toolfold("show", "a", "--store", url, cwd=tmp_path)
    assert shown.returncode == 2
    assert f"(file {main}, record " in shown.stderr and f"byte {last})" in shown.stderr
    assert "fails its checksum" in shown.stderr
    assert main.read_bytes() == bytes(data)  # before, a reader truncated it away
    assert toolfold("show", "b", "1", "--store", url, cwd=tmp_path).stdout == "b\n"


def test_reading_an_sqlite_store_changes_no_file(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    url = f"sqlite:{tmp_path / 's' / 't.db'}"
    assert (
        toolfold("run", "--store", url, "--session", "s", "--", "echo one", cwd=tmp_path).returncode
        == 0
    )
    before = snapshot(tmp_path / "s")
    for args in (["sessions"], ["show", "s"], ["show", "s", "1"]):
        done = toolfold(*args, "--store", url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    after = snapshot(tmp_path / "s")
    assert after["t.db"] == before["t.db"]
    # A read-only SQLite connection may leave its (empty) write-ahead log and the
    # shared-memory index behind; they carry no data.
    assert set(after) - set(before) <= {"t.db-wal", "t.db-shm"}
    assert after.get("t.db-wal", b"") == before.get("t.db-wal", b"")
