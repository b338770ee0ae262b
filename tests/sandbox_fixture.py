"""Fixtures for the confinement tests: a fake home with planted secrets, and a host
directory outside /tmp (a sandboxed command has a private /tmp, so a path under the
host's /tmp would not show what the sandbox does to the host's file system)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SECRET = "PLANTED-SECRET-d41d8cd9"
"""The content of every planted secret: its appearance anywhere is a leak."""


@pytest.fixture
def host_dir() -> Iterator[Path]:
    """A fresh directory under ``~/.cache`` (not under /tmp), removed afterwards."""
    base = Path.home() / ".cache" / "toolfold-tests"
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="sandbox-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def fake_home(host_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``$HOME`` pointing at a directory holding ``~/.ssh/id_ed25519``, ``~/.aws/credentials``,
    ``~/.config/gcloud/credentials.db``, ``~/.netrc`` and ``~/.docker/config.json``, each
    containing ``SECRET``."""
    home = host_dir / "home"
    for rel in (
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".config/gcloud/credentials.db",
        ".netrc",
        ".docker/config.json",
    ):
        path = home / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SECRET + "\n")
    monkeypatch.setenv("HOME", str(home))
    return home
