"""``toolfold mcp --http``: Streamable HTTP with the official SDK client, and its guards."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_helpers import (
    HTTP_TOKEN,
    TOOLFOLD,
    calls,
    clean_env,
    free_port,
    http_server,
    proxy,
    session_on,
    store_url,
    text_of,
)

TOKEN = HTTP_TOKEN

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

BACKGROUND = ["bash_read", "bash_write", "bash_signal", "bash_stop", "bash_list"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """A ``toolfold mcp --http`` subprocess; yields its endpoint URL; killed afterwards."""
    with http_server(tmp_path) as (url, _):
        yield url


@pytest.mark.parametrize("allow", [False, True])
async def test_on_all_interfaces_it_warns_and_serves_no_command_tool_unless_allowed(
    tmp_path: Path, allow: bool
) -> None:
    options = ("--host", "0.0.0.0", *(["--allow-commands"] if allow else []))
    with http_server(tmp_path, *options) as (url, _):
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
            streamable_http_client(url, http_client=http) as (r, w),
            ClientSession(r, w) as client,
        ):
            await client.initialize()
            names = [t.name for t in (await client.list_tools()).tools]
            try:
                bash: Any = await client.call_tool("bash", {"command": "touch ran"})
            except MCPError as exc:
                bash = exc
    warning = (tmp_path / "server-h1.err").read_text().splitlines()[0]
    assert warning.startswith(
        "toolfold: warning: listening on 0.0.0.0, not only on this machine: anyone on the "
        "network who has the token can call the tools"
    )
    if allow:
        assert names == ["bash", "read", "grep", "pytest", *BACKGROUND]
        assert ", and run commands;" in warning
        assert not isinstance(bash, MCPError) and not bash.is_error
        assert (tmp_path / "ran").exists()
    else:
        assert names == ["read", "grep"]
        off = ", ".join(["bash", "pytest", *BACKGROUND])
        assert f"; {off} (which run commands) are off: --allow-commands" in warning
        assert isinstance(bash, MCPError) and "unknown tool 'bash'" in str(bash)
        assert not (tmp_path / "ran").exists()


async def test_the_sdk_client_lists_and_calls_tools_over_http(server: str, tmp_path: Path) -> None:
    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    command = "seq 1 200000"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        streamable_http_client(server, http_client=http) as (r, w),
        ClientSession(r, w) as client,
    ):
        await client.initialize()
        names = [t.name for t in (await client.list_tools()).tools]
        result = await client.call_tool("bash", {"command": command}, progress_callback=on_progress)
        failed = await client.call_tool("bash", {"command": "exit 3"})
    assert names == ["bash", "read", "grep", "pytest", *BACKGROUND]
    structured = result.structured_content or {}
    assert Path(structured["spill_path"]).read_text() == "".join(f"{i}\n" for i in range(1, 200001))
    assert not result.is_error
    assert f'call read with path="{structured["spill_path"]}" and offset=1' in text_of(result)
    assert progress and progress == sorted(set(progress))
    assert failed.is_error
    stored = await calls(tmp_path, "h1")
    assert [c.status for c in stored] == ["ok", "error"]


def test_a_request_without_the_token_is_refused(server: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        reply = httpx.post(server, json=INIT, headers=MCP_HEADERS | headers, timeout=10)
        assert reply.status_code == 401, (headers, reply.text)
        assert "TOOLFOLD_TOKEN" in reply.json()["error"]
    ok = httpx.post(
        server, json=INIT, headers=MCP_HEADERS | {"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert ok.status_code == 200, ok.text


def test_a_foreign_origin_or_host_is_refused_even_with_the_token(server: str) -> None:
    auth = MCP_HEADERS | {"Authorization": f"Bearer {TOKEN}"}
    # A page on another site driving the user's browser (DNS rebinding / CSRF).
    foreign = httpx.post(
        server, json=INIT, headers=auth | {"Origin": "http://evil.example"}, timeout=10
    )
    assert foreign.status_code == 403, foreign.text
    port = server.split(":")[2].split("/")[0]
    rebound = httpx.post(
        server, json=INIT, headers=auth | {"Host": f"evil.example:{port}"}, timeout=10
    )
    assert rebound.status_code == 403, rebound.text
    local = httpx.post(
        server, json=INIT, headers=auth | {"Origin": f"http://127.0.0.1:{port}"}, timeout=10
    )
    assert local.status_code == 200, local.text


def test_an_unusable_token_is_a_one_line_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [*TOOLFOLD, "mcp", "--http", "--port", str(free_port()), "--store", store_url(tmp_path)],
        cwd=tmp_path,
        env=clean_env() | {"TOOLFOLD_TOKEN": "short"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    [line] = [x for x in done.stderr.splitlines() if x.startswith("toolfold: error:")]
    assert "TOOLFOLD_TOKEN cannot be used" in line and "16-512 characters" in line


async def test_the_proxy_reaches_an_http_upstream_with_its_header(
    server: str, tmp_path: Path
) -> None:
    # toolfold mcp --http as the upstream: it refuses requests without the bearer token,
    # so the proxy's --upstream-header must reach it.
    header = ("--upstream-header", f"Authorization: Bearer {TOKEN}")
    errlog = tmp_path / "proxy.err"
    with anyio.fail_after(120):
        async with session_on(
            proxy(tmp_path, options=("--upstream-url", server, *header)), errlog
        ) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("bash", {"command": "echo via-proxy"})
        async with session_on(
            proxy(tmp_path, options=("--upstream-url", server)), errlog
        ) as client:
            with pytest.raises(MCPError, match=re.escape("upstream http://127.0.0.1")):
                await client.list_tools()
    assert "bash" in names and "toolfold_read" in names
    assert text_of(result).startswith("via-proxy\n") and not result.is_error
