"""`toolfold run --max-spill`, and the spill directory symlink attack through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import toolfold


def test_max_spill_caps_the_spill_file_and_the_footer_says_so(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir()
    done = toolfold(
        "run",
        "--store",
        f"sqlite:{store}/t.db",
        "--max-spill",
        "1M",
        "--",
        "yes | head -c 3000000",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    [spill] = (store / "spill").rglob("exec-*.log")
    assert spill.read_bytes() == (b"y\n" * 1_500_000)[: 1 << 20]
    footer = done.stdout.splitlines()[-1]
    assert footer == (
        "[Showing lines 1,498,001-1,500,000 of 1,500,000 (3.9 KiB of 2.9 MiB). "
        f"Full output: {spill} (the first 1.0 MiB only: the spill cap (max_spill))]"
    ), footer


def test_a_bad_max_spill_is_refused_before_anything_runs(tmp_path: Path) -> None:
    done = toolfold(
        "run",
        "--store",
        f"sqlite:{tmp_path}/t.db",
        "--max-spill",
        "0",
        "--",
        "touch ran",
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "--max-spill must be a positive size such as 1048576, 512M or 2G, got 0;" in done.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "t.db").exists()


def test_a_symlink_planted_as_the_session_spill_directory_is_not_followed(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (store / "spill").mkdir(parents=True)
    (store / "spill" / "s").symlink_to(attacker, target_is_directory=True)
    done = toolfold(
        "run",
        "--store",
        f"sqlite:{store}/t.db",
        "--session",
        "s",
        "--",
        "seq 1 100000",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    assert "is a symbolic link" in done.stdout and "follows no link it did not" in done.stdout
    assert list(attacker.iterdir()) == []


def test_run_creates_its_store_and_spill_files_private_whatever_the_umask(
    tmp_path: Path,
) -> None:
    import os
    import stat
    import subprocess

    from cli_helpers import TOOLFOLD, clean_env

    # umask 0 in the child: without explicit modes everything would be world-readable.
    done = subprocess.run(
        [
            "sh",
            "-c",
            'umask 0; exec "$@"',
            "sh",
            *TOOLFOLD,
            "run",
            "--session",
            "s",
            "--",
            "seq 1 100000",
        ],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    home = tmp_path / ".toolfold"
    modes = {
        str(p.relative_to(tmp_path)): stat.S_IMODE(os.lstat(p).st_mode)
        for p in [home, *home.rglob("*")]
    }
    [spill] = [k for k in modes if k.endswith(".log")]
    expected = {
        ".toolfold": 0o700,
        ".toolfold/toolfold.db": 0o600,
        ".toolfold/spill": 0o700,
        ".toolfold/spill/s": 0o700,
        spill: 0o600,
    }
    # -wal and -shm exist only while a connection is open; when left, they are 0600 too.
    assert {k: v for k, v in modes.items() if not k.endswith(("-wal", "-shm"))} == expected
    assert all(v == 0o600 for k, v in modes.items() if k.endswith(("-wal", "-shm")))


def _planted_spill_root(tmp_path: Path, plant: str) -> Path:
    """``.toolfold/spill`` of the default store planted by another user: a link to a
    directory of theirs, or a directory they own. Returns where a write would land."""
    import os

    home = tmp_path / ".toolfold"
    home.mkdir(mode=0o700)
    if plant == "link":
        attacker = tmp_path / "attacker"
        attacker.mkdir()
        (home / "spill").symlink_to(attacker, target_is_directory=True)
        return attacker
    theirs = home / "spill"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 65534, 65534)  # the tests run as root; "nobody" plays the attacker
    return theirs


@pytest.mark.parametrize("plant", ["link", "another user's directory"])
@pytest.mark.parametrize("options", [(), ("--retain", "tail")], ids=["direct", "asyncio"])
def test_a_planted_spill_root_gets_nothing_from_a_run_on_either_path(
    tmp_path: Path, plant: str, options: tuple[str, ...]
) -> None:
    """Marking the session's activity (the landing page's order) makes and judges the
    session's spill directory exactly as the exec env does for a spill file: through a
    planted ``spill/`` nothing is created or touched. The run is not refused for that
    (nothing of its own needs the directory); a command whose output needs a spill file
    gets the spill file's one-line refusal instead."""
    from cli_helpers import clean_env

    target = _planted_spill_root(tmp_path, plant)
    env = clean_env()
    env["TOOLFOLD_DIRECT_RUN"] = "1" if not options else "0"
    done = toolfold("run", *options, "--", "true", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "toolfold: ok, exit status 0" in done.stderr
    assert list(target.iterdir()) == []
    done = toolfold("run", *options, "--", "seq 1 3000", cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stderr
    why = "is a symbolic link" if plant == "link" else "is owned by uid 65534, not you (uid 0)"
    assert f"refusing {tmp_path}/.toolfold/spill" in done.stdout and why in done.stdout
    assert list(target.iterdir()) == []


def test_marking_activity_neither_creates_nor_touches_through_a_planted_link(
    tmp_path: Path,
) -> None:
    """What every host calls per command (``toolfold mcp`` too, where the link may be
    planted after its start): a session directory reached through a link at
    ``spill/`` is neither made nor has its modification time changed."""
    import os

    from toolfold.history import mark_activity

    attacker = tmp_path / "attacker"
    (attacker / "s").mkdir(parents=True)
    os.utime(attacker / "s", (1, 1))
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "spill").symlink_to(attacker, target_is_directory=True)
    mark_activity(home / "spill" / "s")
    mark_activity(home / "spill" / "new")
    assert os.stat(attacker / "s").st_mtime == 1
    assert sorted(p.name for p in attacker.iterdir()) == ["s"]
    # Its own directory is made private and touched.
    (home / "spill").unlink()
    mark_activity(home / "spill" / "s")
    assert (home / "spill" / "s").is_dir() and os.stat(
        home / "spill" / "s"
    ).st_mode & 0o777 == 0o700
