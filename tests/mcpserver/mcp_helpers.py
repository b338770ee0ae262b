"""Helpers for the MCP tests: the official SDK client talking to a real ``toolfold mcp``
subprocess, and read access to the store it records into."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from toolfold.durability import read_lease
from toolfold.harness import Durability
from toolfold.history import CallView, list_calls, pending_output
from toolfold.storage import open_repository

T = TypeVar("T")

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]

COMMITS = 50_000
"""Commits in the ``big_repo`` fixture's repository."""


def clean_env() -> dict[str, str]:
    """The test environment without a developer's ``TOOLFOLD_STORE`` / token."""
    return {
        k: v for k, v in os.environ.items() if k not in ("TOOLFOLD_STORE", "TOOLFOLD_TOKEN")
    } | {"PYTHONUNBUFFERED": "1"}


def store_url(tmp_path: Path) -> str:
    """A fresh SQLite store under the test's directory (which is made here: toolfold
    creates no directory for an explicit store path)."""
    (tmp_path / "store").mkdir(mode=0o700, exist_ok=True)
    return f"sqlite:{tmp_path / 'store' / 'toolfold.db'}"


def stdio_params(
    tmp_path: Path, *args: str, session: str = "s1", env: dict[str, str] | None = None
) -> StdioServerParameters:
    """``toolfold mcp --store <tmp store> --session S ARGS`` in ``tmp_path``."""
    return StdioServerParameters(
        command=TOOLFOLD[0],
        args=[*TOOLFOLD[1:], "mcp", "--store", store_url(tmp_path), "--session", session, *args],
        env=clean_env() | (env or {}),
        cwd=str(tmp_path),
    )


@contextlib.asynccontextmanager
async def connect(
    tmp_path: Path, *args: str, session: str = "s1", env: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session on a new ``toolfold mcp`` subprocess (stdio);
    leaving the block closes stdin, which stops the server."""
    with open(tmp_path / f"server-{session}.err", "a") as errlog:
        async with (
            stdio_client(
                stdio_params(tmp_path, *args, session=session, env=env), errlog=errlog
            ) as (r, w),
            ClientSession(r, w) as client,
        ):
            await client.initialize()
            yield client


async def calls(tmp_path: Path, session: str = "s1") -> list[CallView]:
    """The calls the store holds for ``session`` (read while the server may run)."""
    repo = open_repository(store_url(tmp_path))
    try:
        if session not in await repo.list_sessions():
            return []
        s = await repo.open_session(session)
        return await list_calls(s)
    finally:
        await repo.close()


async def lease_owners(tmp_path: Path, session: str = "s1") -> list[str]:
    """The lease owner of each unsettled operation of ``session`` (``"-"`` if unleased)."""
    repo = open_repository(store_url(tmp_path))
    try:
        s = await repo.open_session(session)
        owners = []
        for pending in await Durability(s).pending_operations():
            lease = await read_lease(s, pending.operation_id)
            owners.append("-" if lease is None else lease.owner)
        return owners
    finally:
        await repo.close()


async def pending_text(tmp_path: Path, session: str = "s1") -> str:
    """The text of the first unsettled call's last durable checkpoint ("" if none)."""
    repo = open_repository(store_url(tmp_path))
    try:
        if session not in await repo.list_sessions():
            return ""
        s = await repo.open_session(session)
        for call in await list_calls(s):
            if not call.settled:
                state = await pending_output(s, call)
                if isinstance(state, dict):
                    return str(state["content"][0]["text"])
        return ""
    finally:
        await repo.close()


def text_of(result: Any) -> str:
    """The text block of a ``CallToolResult``."""
    return str(result.content[0].text)


def poll(probe: Callable[[], T | None], what: str, *, tries: int = 600, every: float = 0.05) -> T:
    """Call ``probe`` until it returns something truthy, at most ``tries`` times."""
    for _ in range(tries):
        found = probe()
        if found:
            return found
        time.sleep(every)
    raise AssertionError(f"gave up waiting for {what} after {tries} tries")


def kill_group_in(pidfile: Path) -> None:
    """Kill the process group whose leader's pid a test command wrote to ``pidfile``
    (bash commands run in their own session and outlive a SIGKILLed server)."""
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        os.killpg(int(pidfile.read_text().split()[0]), signal.SIGKILL)


@contextlib.asynccontextmanager
async def session_on(
    params: StdioServerParameters, errlog_path: Path, **callbacks: Any
) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session on the server ``params`` runs (stdio), with
    ``ClientSession`` callbacks; leaving the block closes stdin, which stops it."""
    with open(errlog_path, "a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (r, w),
            ClientSession(r, w, **callbacks) as client,
        ):
            await client.initialize()
            yield client


def proxy(
    tmp_path: Path, *upstream: str, options: tuple[str, ...] = (), session: str = "p1"
) -> StdioServerParameters:
    """``toolfold mcp proxy --store <tmp store> --session S OPTIONS -- UPSTREAM...``
    (give ``upstream`` empty with ``--upstream-url`` in ``options``)."""
    return StdioServerParameters(
        command=TOOLFOLD[0],
        args=[
            *TOOLFOLD[1:],
            "mcp",
            "proxy",
            "--store",
            store_url(tmp_path),
            "--session",
            session,
            *options,
            *(("--", *upstream) if upstream else ()),
        ],
        env=clean_env(),
        cwd=str(tmp_path),
    )


def free_port() -> int:
    """A loopback port nothing listens on (yet)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def http_upstream(
    command: list[str], port: int, errlog_path: Path
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``command`` (an MCP server listening on ``port``) until the block ends; yields
    its ``/mcp`` URL, once it listens, and its process. The server gets ``PORT`` in its
    environment."""
    with open(errlog_path, "w") as err:
        server = subprocess.Popen(
            command,
            env=clean_env() | {"PORT": str(port)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )

    def listening() -> bool:
        assert server.poll() is None, errlog_path.read_text()
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        poll(listening, "the HTTP upstream to listen")
        yield f"http://127.0.0.1:{port}/mcp", server
    finally:
        with contextlib.suppress(ProcessLookupError):  # the test may have killed it
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()


HTTP_TOKEN = "test-token-0123456789"
"""The bearer token of the ``toolfold mcp --http`` servers the tests start."""


@contextlib.contextmanager
def http_server(
    tmp_path: Path,
    *args: str,
    session: str = "h1",
    port: int | None = None,
    launcher: list[str] = TOOLFOLD,  # read only
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A ``toolfold mcp --http --store <tmp store> --session S ARGS`` subprocess (token
    ``HTTP_TOKEN``), started by ``launcher``; yields its endpoint URL, once it answers,
    and its process; killed afterwards (a test may kill it first)."""
    port = port or free_port()
    with open(tmp_path / f"server-{session}.err", "a") as err:
        proc = subprocess.Popen(
            [
                *launcher,
                "mcp",
                "--http",
                "--port",
                str(port),
                "--store",
                store_url(tmp_path),
                "--session",
                session,
                *args,
            ],
            cwd=tmp_path,
            env=clean_env() | {"TOOLFOLD_TOKEN": HTTP_TOKEN},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/mcp"

    def answering() -> bool:
        assert proc.poll() is None, (tmp_path / f"server-{session}.err").read_text()
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    try:
        poll(answering, "the MCP HTTP server to answer")
        yield url, proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
