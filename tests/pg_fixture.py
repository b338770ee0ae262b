"""PostgreSQL for tests: ``$TOOLFOLD_TEST_POSTGRES_DSN`` or a throwaway local cluster.

Registered from ``tests/conftest.py`` (``pytest_plugins``) so every test directory can use

- ``postgres_server`` (session scope): a DSN of a server we may create databases on;
- ``postgres_url`` (per test): a fresh, empty database, dropped afterwards.

Without the DSN variable the fixture runs ``initdb`` + ``pg_ctl`` from
``/usr/lib/postgresql/*/bin`` in a temp dir (as the ``postgres`` user when we are root,
because PostgreSQL refuses to run as root), listening only on a Unix socket. Missing
binaries are a test failure with install instructions, never a silent skip.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ENV_DSN = "TOOLFOLD_TEST_POSTGRES_DSN"


@dataclass
class Cluster:
    """A running throwaway cluster; :meth:`stop` removes everything."""

    root: Path
    bindir: Path
    port: int
    as_postgres: bool

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.root / 'sock'}&port={self.port}"

    def _cmd(self, *args: str) -> list[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        return ["runuser", "-u", "postgres", "--", *cmd] if self.as_postgres else cmd

    def stop(self) -> None:
        subprocess.run(
            self._cmd("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"),
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def find_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` holding initdb (or initdb on PATH)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cluster(*, fsync: bool = False) -> Cluster:
    """Start a throwaway cluster (``fsync=off`` unless asked: tests need no power-loss
    safety, benchmarks measuring fsync pass ``fsync=True``)."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError(
            "PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin and "
            "PATH). Install them with `sudo apt-get install postgresql` (or run "
            "`python3 dev.py test` as root, which installs them), or set "
            f"{ENV_DSN} to a server DSN the tests may create databases on."
        )
    as_postgres = os.geteuid() == 0
    root = Path(tempfile.mkdtemp(prefix="tfpg-"))
    (root / "sock").mkdir()
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
        shutil.chown(root / "sock", "postgres", "postgres")
    cluster = Cluster(root, bindir, _free_port(), as_postgres)
    try:
        subprocess.run(
            cluster._cmd(
                "initdb",
                "-D",
                str(root / "data"),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--locale=C",
            ),
            capture_output=True,
            check=True,
            cwd=root,
        )
        opts = (
            f"-k {root / 'sock'} -p {cluster.port} -c listen_addresses='' "
            f"-c fsync={'on' if fsync else 'off'} -c max_connections=200"
        )
        subprocess.run(
            cluster._cmd(
                "pg_ctl",
                "-D",
                str(root / "data"),
                "-l",
                str(root / "log"),
                "-w",
                "-o",
                opts,
                "start",
            ),
            capture_output=True,
            check=True,
            cwd=root,
        )
    except subprocess.CalledProcessError as exc:
        log = (root / "log").read_text(errors="replace") if (root / "log").exists() else ""
        cluster.stop()
        raise RuntimeError(
            f"could not start a throwaway PostgreSQL cluster: {exc}\n"
            f"stdout: {exc.stdout!r}\nstderr: {exc.stderr!r}\nlog: {log}"
        ) from exc
    return cluster


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A DSN of a PostgreSQL server the tests may create databases on."""
    dsn = os.environ.get(ENV_DSN)
    if dsn:
        yield dsn
        return
    try:
        cluster = start_cluster()
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


def with_dbname(dsn: str, dbname: str) -> str:
    """``dsn`` pointed at database ``dbname``, as a ``postgresql://`` URL (store URLs
    are recognised by that scheme)."""
    import urllib.parse

    import psycopg.conninfo

    params = psycopg.conninfo.conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return "postgresql://?" + urllib.parse.urlencode({k: str(v) for k, v in params.items()})


@contextlib.contextmanager
def fresh_database(server: str, name: str) -> Iterator[str]:
    """Create the empty database ``name`` on ``server`` and give its URL; drop it on the
    way out (``FORCE``: connections a test left open do not keep it alive)."""
    import psycopg

    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield with_dbname(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A DSN of a fresh empty database (dropped after the test)."""
    with fresh_database(postgres_server, f"tf_{uuid.uuid4().hex[:16]}") as url:
        yield url
