"""A real OpenSSH server on a loopback port for the remote exec tests, and process checks.

The ``sshd_server`` fixture (session-scoped, started on first use) is registered in
``tests/conftest.py``.

``start_sshd(dir)`` generates a host key and a user key into ``dir``, writes an
``sshd_config`` that accepts only that key on 127.0.0.1:<free port>, runs
``sshd -D -e`` and waits (bounded) until it accepts connections. The remote side runs
this very venv's ``toolfold exec-host`` by absolute path.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import select
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolfold.execenv import CommandTransport, SSHTransport

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"

EXEC_HOST = shlex.join([sys.executable, "-m", "toolfold.cli", "exec-host"])
"""The remote command: this venv's toolfold, by absolute path (no PATH needed)."""


def local_transport() -> CommandTransport:
    """The container-style transport with a stand-in prefix (``env``), since docker
    cannot run here: the same code path as ``docker exec -i C``, minus the container."""
    return CommandTransport(["env"], remote_command=EXEC_HOST)


@dataclass(frozen=True)
class SSHServer:
    port: int
    key: Path
    known_hosts: Path
    process: subprocess.Popen[bytes]

    @property
    def destination(self) -> str:
        return f"{getpass.getuser()}@127.0.0.1"

    @property
    def options(self) -> list[str]:
        return [
            "-F",
            "/dev/null",
            "-p",
            str(self.port),
            "-i",
            str(self.key),
            "-o",
            "IdentitiesOnly=yes",
            "-o",
            f"UserKnownHostsFile={self.known_hosts}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "ConnectTimeout=10",
        ]

    def transport(self, remote_command: str = EXEC_HOST) -> SSHTransport:
        return SSHTransport(self.destination, options=self.options, remote_command=remote_command)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def start_sshd(directory: Path) -> Iterator[SSHServer]:
    """Run sshd on 127.0.0.1:<free port> until the block ends (killed also on failure)."""
    if not Path(SSHD).exists():
        raise RuntimeError(
            f"sshd not found at {SSHD}: install openssh-server "
            "(`python3 dev.py test` as root installs it)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    host_key, user_key = directory / "host_key", directory / "user_key"
    _keygen(host_key)
    _keygen(user_key)
    (directory / "authorized_keys").write_bytes(user_key.with_suffix(".pub").read_bytes())
    port = free_port()
    config = directory / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                "ListenAddress 127.0.0.1",
                f"HostKey {host_key}",
                f"AuthorizedKeysFile {directory / 'authorized_keys'}",
                f"PidFile {directory / 'sshd.pid'}",
                "StrictModes no",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "PermitRootLogin prohibit-password",
                "LogLevel ERROR",
                "",
            ]
        )
    )
    # sshd insists on its privilege separation directory even when started by hand.
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    known = directory / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_key.with_suffix('.pub').read_text()}")
    log = (directory / "sshd.log").open("wb")
    process = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(config)], stderr=log, stdin=subprocess.DEVNULL
    )
    try:
        for _ in range(400):  # bounded: up to ~20 s for sshd to listen
            if process.poll() is not None:
                raise RuntimeError(
                    f"sshd exited with {process.returncode}: {(directory / 'sshd.log').read_text()}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("sshd did not listen within 20 s")
        yield SSHServer(port, user_key, known, process)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def wait_gone(pid: int, timeout: float = 15.0) -> bool:
    """True once ``pid`` has exited (a zombie counts), waiting on its pidfd (bounded)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def read_pid(path: Path, tries: int = 400) -> int:
    """The pid a command wrote to ``path`` (bounded wait for it to appear)."""
    for _ in range(tries):
        with contextlib.suppress(FileNotFoundError, ValueError):
            text = path.read_text()
            if text.endswith("\n"):
                return int(text)
        time.sleep(0.05)
    raise AssertionError(f"no pid in {path} after {tries} tries")


@pytest.fixture(scope="session")
def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SSHServer]:
    """One sshd for the whole test session (key generation and start-up cost ~1 s)."""
    with start_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server
