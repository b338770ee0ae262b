"""Files and directories planted where toolfold would write are refused, never adopted.

The attacker is another local user who can write the directory the store lives in
(``/tmp``, a shared CI workspace) and plants something before the victim runs. The tests
run as root, so "another user" is uid 65534 (``nobody``), and the mode checks use a group
that is not root's; root-owned files are the victim's own. Each test performs the attack
through the real CLI, shows the one-line refusal, and that nothing ran or was written
through the planted thing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_helpers import toolfold

NOBODY = 65534


def run_at(tmp_path: Path, store: str | None) -> tuple[int, str]:
    where = ("--store", store) if store else ()
    done = toolfold("run", *where, "--", "touch ran", cwd=tmp_path)
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    ("owner", "group", "mode", "why"),
    [
        (NOBODY, 0, 0o666, f"it is owned by uid {NOBODY}, not you (uid 0); remove it"),
        (NOBODY, 0, 0o600, f"it is owned by uid {NOBODY}, not you (uid 0); remove it"),
        (0, 0, 0o666, "it is writable by others (mode 0666); run chmod go-w"),
        (0, NOBODY, 0o660, f"it is writable by group {NOBODY} (mode 0660); run chmod go-w"),
    ],
)
def test_a_planted_database_is_refused_and_not_written(
    tmp_path: Path, owner: int, group: int, mode: int, why: str
) -> None:
    shared = tmp_path / "D"
    shared.mkdir()
    planted = shared / "t.db"
    planted.write_bytes(b"")
    os.chown(planted, owner, group)
    os.chmod(planted, mode)
    code, err = run_at(tmp_path, f"sqlite:{planted}")
    assert code == 2
    assert err == (
        f"toolfold: error: store sqlite:{planted} cannot be used: refusing {planted}: {why} "
        + (f"{planted}, or choose another path\n" if "chmod" in why else "or choose another path\n")
    )
    assert planted.read_bytes() == b"" and not (tmp_path / "ran").exists()
    assert sorted(p.name for p in shared.iterdir()) == ["t.db"]  # no -wal, no -shm


@pytest.mark.parametrize("side", ["-wal", "-shm", "-journal"])
def test_a_link_planted_as_the_databases_wal_shm_or_journal_is_refused(
    tmp_path: Path, side: str
) -> None:
    shared = tmp_path / "D"
    shared.mkdir()
    loot = tmp_path / "attacker.log"
    loot.write_bytes(b"")
    (shared / f"t.db{side}").symlink_to(loot)
    code, err = run_at(tmp_path, f"sqlite:{shared}/t.db")
    assert code == 2
    assert f"refusing {shared}/t.db{side}: it is a symbolic link (to '{loot}')" in err
    assert err.count("\n") == 1
    assert loot.read_bytes() == b"" and not (tmp_path / "ran").exists()


def test_a_store_in_a_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, NOBODY, NOBODY)
    code, err = run_at(tmp_path, f"sqlite:{theirs}/t.db")
    assert code == 2
    assert (
        f"refusing {theirs}/t.db: its directory {theirs} is owned by uid {NOBODY}, not you "
        "(uid 0); choose a path in a directory only you (or root) can change"
    ) in err
    assert list(theirs.iterdir()) == []


def test_a_store_in_a_world_writable_directory_is_refused_unless_it_is_sticky(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    code, err = run_at(tmp_path, f"sqlite:{shared}/t.db")
    assert code == 2
    assert f"its directory {shared} is writable by others (mode 0777)" in err
    assert list(shared.iterdir()) == []
    # Sticky, as /tmp is: others can add names but not replace ours, so it is usable.
    os.chmod(shared, 0o1777)
    code, err = run_at(tmp_path, f"sqlite:{shared}/t.db")
    assert code == 0, err
    assert (tmp_path / "ran").exists()


def test_a_jsonl_session_file_planted_by_another_user_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "J"
    store.mkdir()
    assert run_at(tmp_path, f"jsonl:{store}")[0] == 0
    [log] = store.glob("*.jsonl")
    before = log.read_bytes()
    os.chown(log, NOBODY, NOBODY)
    name = log.name.removesuffix(".jsonl")
    done = toolfold(
        "run", "--store", f"jsonl:{store}", "--session", name, "--", "touch again", cwd=tmp_path
    )
    assert done.returncode == 2
    assert f"refusing {log}: it is owned by uid {NOBODY}, not you (uid 0)" in done.stderr
    assert log.read_bytes() == before and not (tmp_path / "again").exists()


def test_an_explicit_store_path_in_a_missing_directory_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    for url in (f"sqlite:{missing}/x.db", f"jsonl:{missing}/store"):
        code, err = run_at(tmp_path, url)
        assert code == 2
        assert err == (
            f"toolfold: error: store {url}: the directory {missing} does not exist; create it "
            "first (toolfold creates only the default store's directory, .toolfold/)\n"
        )
    assert not (tmp_path / "nonexistent").exists() and not (tmp_path / "ran").exists()
    # The default store's directory is toolfold's to make.
    code, err = run_at(tmp_path, None)
    assert code == 0, err
    assert (tmp_path / ".toolfold" / "toolfold.db").is_file()


def test_a_jsonl_store_url_naming_a_file_says_it_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "t.db"
    file.write_bytes(b"not a directory")
    for args in (("run", "--", "touch ran"), ("sessions",)):
        done = toolfold(*args[:1], "--store", f"jsonl:{file}", *args[1:], cwd=tmp_path)
        assert done.returncode == 2
        assert done.stderr == (
            f"toolfold: error: store path {file} is a file, not a JSONL store directory "
            f"(store URL jsonl:{file}); use sqlite:{file} if it is a SQLite store, or name a "
            "directory\n"
        )
    assert file.read_bytes() == b"not a directory" and not (tmp_path / "ran").exists()
