"""Every user error ends as one ``toolfold: error: ...`` line, exit status 2, no traceback,
and leaves what the store already held intact."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_helpers import clean_env, one_error_line, toolfold


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store with one settled call in session ``good``."""
    home = tmp_path_factory.mktemp("errors")
    url = f"sqlite:{home / 'toolfold.db'}"
    proc = toolfold("run", "--store", url, "--session", "good", "--", "echo kept", cwd=home)
    assert proc.returncode == 0, proc.stderr
    return home, url


def _intact(home: Path, url: str) -> None:
    shown = toolfold("show", "good", "1", "--store", url, cwd=home)
    assert shown.returncode == 0 and shown.stdout == "kept\n"
    listed = toolfold("sessions", "--store", url, cwd=home)
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == ["good"]


def test_unknown_session(store: tuple[Path, str]) -> None:
    home, url = store
    for command in (["show", "nope"], ["show", "nope", "1"], ["resume", "nope"]):
        line = one_error_line(toolfold(*command, "--store", url, cwd=home))
        assert "no session 'nope' in store sqlite:" in line
        assert "(sessions: good)" in line and "toolfold sessions" in line
    _intact(home, url)


def test_unknown_call(store: tuple[Path, str]) -> None:
    home, url = store
    line = one_error_line(toolfold("show", "good", "call-zzz", "--store", url, cwd=home))
    assert line == (
        "toolfold: error: no call 'call-zzz' in session 'good' (1 call); "
        "see `toolfold show good` for numbers and ids"
    )
    line = one_error_line(toolfold("show", "good", "2", "--store", url, cwd=home))
    assert "no call '2' in session 'good'" in line


def test_no_store_here(tmp_path: Path) -> None:
    line = one_error_line(toolfold("sessions", cwd=tmp_path))
    assert f"no store at {tmp_path / '.toolfold' / 'toolfold.db'}" in line
    assert not (tmp_path / ".toolfold").exists()  # reading never creates a store
    line = one_error_line(toolfold("show", "x", "--store", f"jsonl:{tmp_path / 'j'}", cwd=tmp_path))
    assert f"no store directory {tmp_path / 'j'}" in line


def test_corrupt_sqlite_file_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    garbage = b"this is not a database, " * 40
    bad.write_bytes(garbage)
    for command in (["sessions"], ["show", "s"], ["resume", "s"], ["run", "--", "echo x"]):
        args = [command[0], "--store", f"sqlite:{bad}", *command[1:]]
        line = one_error_line(toolfold(*args, cwd=tmp_path))
        assert f"store sqlite:{bad} is corrupt (file {bad})" in line, line
        assert "not a usable toolfold SQLite store" in line
    assert bad.read_bytes() == garbage  # nothing was "repaired" away


def test_corrupt_jsonl_record_is_named(tmp_path: Path) -> None:
    url = f"jsonl:{tmp_path / 'j'}"
    for name in ("s1", "s2"):
        proc = toolfold(
            "run", "--store", url, "--session", name, "--", f"echo {name}", cwd=tmp_path
        )
        assert proc.returncode == 0, proc.stderr
    file = tmp_path / "j" / "s1.jsonl"
    lines = file.read_text().splitlines(keepends=True)
    damaged = "".join([lines[0], "{not json\n", *lines[1:]])
    file.write_text(damaged)
    line = one_error_line(toolfold("show", "s1", "--store", url, cwd=tmp_path))
    where = f"(file {file}, record 2, byte {len(lines[0])})"
    assert where in line and "fails its checksum" in line
    # `sessions` still lists the healthy session, then fails naming the damaged one.
    listed = toolfold("sessions", "--store", url, cwd=tmp_path)
    line = one_error_line(listed)
    assert where in line
    assert "s2" in listed.stdout and "corrupt" in listed.stdout
    assert file.read_text() == damaged
    shown = toolfold("show", "s2", "1", "--store", url, cwd=tmp_path)
    assert shown.returncode == 0 and shown.stdout == "s2\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--max-bytes", "0"],
            "--max-bytes must be between 1 and 16,777,216, got 0; the default is 51,200",
        ),
        (
            ["--max-lines", "2000000"],
            "--max-lines must be between 1 and 1,000,000, got 2000000; the default is 2,000",
        ),
        (["--max-lines", "-3"], "--max-lines must be between 1 and 1,000,000, got -3"),
        (
            ["--max-bytes", "lots"],
            "Invalid value for '--max-bytes': 'lots' is not a size: give bytes, or a whole "
            "number with K, M or G (powers of 1024), e.g. 51200, 50K or 1G",
        ),
        (
            ["--retain", "middle"],
            "Invalid value for '--retain': 'middle' is not one of 'head', 'tail'",
        ),
        (["--session", "a b"], "invalid session name 'a b': use 1-128 characters"),
        (
            ["--head-share", "0.5"],
            "--head-share applies to --retain head_tail; add --retain head_tail or drop "
            "--head-share",
        ),
        (
            ["--retain", "head_tail", "--head-share", "1"],
            "--head-share must be a fraction between 0 and 1 (exclusive), got 1; "
            "the default is 0.2",
        ),
        (
            ["--retain", "head_tail", "--head-share", "nan"],
            "--head-share must be a fraction between 0 and 1 (exclusive), got nan",
        ),
        (
            ["--retain", "head_tail", "--head-share", "a fifth"],
            "Invalid value for '--head-share': 'a fifth' is not a valid float",
        ),
        (
            ["--retain", "head_tail", "--max-lines", "1"],
            "--max-lines must be between 2 and 1,000,000 with --retain head_tail, got 1; "
            "the default is 2,000",
        ),
    ],
)
def test_invalid_run_options(store: tuple[Path, str], args: list[str], message: str) -> None:
    home, url = store
    before = (home / "toolfold.db").read_bytes()
    line = one_error_line(toolfold("run", "--store", url, *args, "--", "echo never", cwd=home))
    assert message in line
    # Refused before the store is opened: not one byte of it changed.
    assert (home / "toolfold.db").read_bytes() == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--head-share", "0.5"],
            "--head-share applies to --bash-retain head_tail; add --bash-retain head_tail "
            "or drop --head-share",
        ),
        (
            ["--bash-retain", "tail", "--head-share", "0.5"],
            "--head-share applies to --bash-retain head_tail",
        ),
        (
            ["--bash-retain", "head_tail", "--head-share", "-0.2"],
            "--head-share must be a fraction between 0 and 1 (exclusive), got -0.2; "
            "the default is 0.2",
        ),
        (
            ["proxy", "--retain", "head_tail", "--head-share", "0", "--", "true"],
            "--head-share must be a fraction between 0 and 1 (exclusive), got 0",
        ),
    ],
)
def test_invalid_mcp_head_share(store: tuple[Path, str], args: list[str], message: str) -> None:
    home, url = store
    before = (home / "toolfold.db").read_bytes()
    if args[0] == "proxy":
        command = ["mcp", "proxy", "--store", url, *args[1:]]
    else:
        command = ["mcp", "--store", url, *args]
    line = one_error_line(toolfold(*command, cwd=home))
    assert message in line
    # Refused before the store is opened or anything is served.
    assert (home / "toolfold.db").read_bytes() == before
    _intact(home, url)


@pytest.mark.parametrize("url", ["foo:bar", "sqlit:x.db", "ftp://host/x", "x.sqlite"])
def test_unknown_store_scheme(tmp_path: Path, url: str) -> None:
    line = one_error_line(toolfold("sessions", "--store", url, cwd=tmp_path))
    assert f"unknown store URL {url!r}" in line
    assert "use one of sqlite:PATH, jsonl:DIR, postgresql://..., memory:" in line
    env = clean_env()
    env["TOOLFOLD_STORE"] = url
    line = one_error_line(toolfold("run", "--", "echo x", cwd=tmp_path, env=env))
    assert f"unknown store URL {url!r}" in line
    assert list(tmp_path.iterdir()) == []


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    line = one_error_line(toolfold("bogus", cwd=tmp_path))
    assert line == "toolfold: error: No such command 'bogus'. (see `toolfold --help`)"
    line = one_error_line(toolfold("run", cwd=tmp_path))
    assert "Missing argument '-- COMMAND...'" in line and "toolfold run --help" in line
    line = one_error_line(toolfold("serve", "--port", "0", cwd=tmp_path))
    assert "--port must be between 1 and 65535, got 0" in line


def test_unwritable_store_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    line = one_error_line(
        toolfold(
            "run", "--store", f"sqlite:{blocker / 'sub' / 'x.db'}", "--", "echo x", cwd=tmp_path
        )
    )
    assert f"store sqlite:{blocker / 'sub' / 'x.db'}: the directory {blocker / 'sub'} does " in line
    # The default store's directory is made by toolfold, unless a file is in the way.
    (tmp_path / ".toolfold").write_text("a file where the store directory should be")
    line = one_error_line(toolfold("run", "--", "echo x", cwd=tmp_path))
    assert line == (
        f"toolfold: error: store sqlite:{tmp_path / '.toolfold' / 'toolfold.db'} cannot be "
        f"used: refusing {tmp_path / '.toolfold'}: {tmp_path / '.toolfold'} is not a "
        "directory; choose another path"
    )


def test_unreadable_durable_record_is_a_store_error(tmp_path: Path) -> None:
    import asyncio

    from toolfold.storage import ephemeral_scope, open_repository, set_value, value

    url = f"sqlite:{tmp_path / 'toolfold.db'}"

    async def damage() -> None:
        repo = open_repository(url)
        try:
            session = await repo.create_session("odd")
            scope = ephemeral_scope("op-1")
            # An operation whose call record lacks every field resume needs.
            await session.commit(
                [
                    set_value(value("op.meta", "op-1", scope), {"run_id": "op-1"}),
                    set_value(value("op.calls", "op-1:c1", scope), {"bogus": True}),
                ]
            )
        finally:
            await repo.close()

    asyncio.run(damage())
    before = (tmp_path / "toolfold.db").read_bytes()
    for command in (["show", "odd"], ["resume", "odd"]):
        line = one_error_line(toolfold(command[0], "--store", url, *command[1:], cwd=tmp_path))
        assert f"store {url} holds durable records that cannot be read" in line
        assert "malformed call record at op.calls/op-1:c1" in line
    assert (tmp_path / "toolfold.db").read_bytes() == before


def test_serve_on_a_port_in_use(tmp_path: Path) -> None:
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        line = one_error_line(
            toolfold("serve", "--port", str(port), "--store", "memory:", cwd=tmp_path)
        )
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in line
    assert "pick another --port" in line
