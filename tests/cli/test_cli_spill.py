"""`toolfold run --max-spill`, and the spill directory symlink attack through the CLI."""

from __future__ import annotations

from pathlib import Path

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
