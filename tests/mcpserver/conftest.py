"""Fixtures of the MCP proxy tests: real third-party upstream servers.

The upstreams are installed on first use (the package registries are needed once):
``mcp-server-git`` from PyPI into its own virtualenv, and
``@modelcontextprotocol/server-everything`` from npm, both under ``.venv/mcp-upstreams/``,
and the MCP conformance suite (with the Node 22 it needs) beside them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_helpers import COMMITS

ROOT = Path(__file__).resolve().parents[2]
UPSTREAMS = ROOT / ".venv" / "mcp-upstreams"


@pytest.fixture(scope="session")
def git_server() -> Path:
    venv = UPSTREAMS / "git"
    exe = venv / "bin" / "mcp-server-git"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "mcp-server-git"], check=True, timeout=900
        )
    return exe


@pytest.fixture(scope="session")
def everything_server() -> Path:
    prefix = UPSTREAMS / "npm"
    exe = prefix / "node_modules" / ".bin" / "mcp-server-everything"
    if not exe.exists():
        npm = shutil.which("npm")
        assert npm, "npm is needed to install @modelcontextprotocol/server-everything"
        subprocess.run(
            [
                npm,
                "install",
                "--silent",
                "--prefix",
                str(prefix),
                "@modelcontextprotocol/server-everything",
            ],
            check=True,
            timeout=900,
        )
    return exe


CONFORMANCE = "0.1.16"
"""The MCP conformance suite's newest release: the protocol scenarios."""

CONFORMANCE_NEXT = "0.2.0-alpha.12"
"""Its 0.2 pre-release, the first with the tasks extension's scenarios."""


def _conformance(version: str) -> tuple[Path, Path]:
    """``(node, cli)`` of ``@modelcontextprotocol/conformance@version``, installed on
    first use. It needs Node >= 22: the ``node@22`` npm package brings that binary
    along, whatever node runs npm."""
    prefix = UPSTREAMS / f"conformance-{version}"
    node = prefix / "node_modules" / ".bin" / "node"
    cli = prefix / "node_modules" / ".bin" / "conformance"
    if not (node.exists() and cli.exists()):
        npm = shutil.which("npm")
        assert npm, "npm is needed to install @modelcontextprotocol/conformance"
        subprocess.run(
            [
                npm,
                "install",
                "--silent",
                "--prefix",
                str(prefix),
                "node@22",
                f"@modelcontextprotocol/conformance@{version}",
            ],
            check=True,
            timeout=900,
        )
    return node, cli


@pytest.fixture(scope="session")
def conformance_suite() -> tuple[Path, Path]:
    """The conformance suite's protocol scenarios (``CONFORMANCE``)."""
    return _conformance(CONFORMANCE)


@pytest.fixture(scope="session")
def conformance_next() -> tuple[Path, Path]:
    """The conformance suite with the tasks scenarios (``CONFORMANCE_NEXT``)."""
    return _conformance(CONFORMANCE_NEXT)


@pytest.fixture(scope="session")
def big_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository with 50,000 commits (made with fast-import in a few seconds)."""
    repo = tmp_path_factory.mktemp("repo")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    parts = []
    for i in range(COMMITS):
        message = f"commit number {i}: adjust the frobnicator\n"
        parts.append(
            f"commit refs/heads/main\ncommitter Dev <dev@example.com> {1_700_000_000 + i} +0000\n"
            f"data {len(message)}\n{message}\n"
        )
    subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=repo, input="".join(parts).encode(), check=True
    )
    return repo
