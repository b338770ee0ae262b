"""The escape attempts through `toolfold mcp`'s bash tool with the official MCP SDK
client, in each profile: refused with the OS's ordinary error, the host unchanged; and
the tool descriptions name the profile the server runs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_helpers import TOOLFOLD, clean_env, text_of

from sandbox_escapes import ATTEMPTS, SECRET, Attempt, Scene, no_escape_marker, scene, snapshot


@contextlib.asynccontextmanager
async def server(s: Scene, profile: str) -> AsyncIterator[ClientSession]:
    """``toolfold mcp --sandbox PROFILE`` in the workspace, its store ``s.store_file``
    (so its spill directory is ``s.spill``), with tokens in its environment."""
    params = StdioServerParameters(
        command=TOOLFOLD[0],
        args=[
            *TOOLFOLD[1:],
            "mcp",
            "--store",
            f"sqlite:{s.store_file}",
            "--session",
            "s1",
            "--sandbox",
            profile,
        ],
        env=clean_env() | {"TOOLFOLD_TOKEN": SECRET, "DEPLOY_API_KEY": SECRET},
        cwd=str(s.ws),
    )
    with open(s.outside.parent / "server.err", "a") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (r, w),
            ClientSession(r, w) as client,
        ):
            await client.initialize()
            yield client


@pytest.mark.parametrize("profile", ["read-only", "workspace-write"])
async def test_escape_attempts_through_the_mcp_bash_tool_are_refused(
    profile: str, host_dir: Path, fake_home: Path
) -> None:
    with scene(host_dir, fake_home, profile) as s:
        s.store_file.unlink()  # the server's own database takes its place
        s.records = s.store_file.name  # it records each command, ESCAPED included
        async with server(s, profile) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            for name in ("bash", "read", "grep", "pytest"):
                assert f"runs in the {profile} sandbox" in (tools[name].description or "")
            for attempt in ATTEMPTS:
                await one(client, attempt, s, host_dir)


async def one(client: ClientSession, attempt: Attempt, s: Scene, host_dir: Path) -> None:
    before = _outside_workspace(snapshot(host_dir), s)
    # `exit 0`: the text is then the command's output alone (no exit-status footer).
    result = await client.call_tool("bash", {"command": f"{{ {attempt.command(s)}; }}; exit 0"})
    text = text_of(result)
    attempt.check(s, text)
    assert SECRET not in text, attempt.name
    assert _outside_workspace(snapshot(host_dir), s) == before, attempt.name
    no_escape_marker(host_dir, records=s.records)


def _outside_workspace(snap: dict[str, object], s: Scene) -> dict[str, object]:
    # The store is the server's own (it records each call), and a workspace-write
    # command may change the workspace: the rest of the host must not change at all.
    skip = ["store/"] + (["ws/"] if s.profile == "workspace-write" else [])
    return {k: v for k, v in snap.items() if not any(k.startswith(p) for p in skip)}


async def test_read_refuses_a_secret_through_mcp(host_dir: Path, fake_home: Path) -> None:
    with scene(host_dir, fake_home, "workspace-write") as s:
        s.store_file.unlink()
        async with server(s, "workspace-write") as client:
            result = await client.call_tool("read", {"path": "key"})
            refused = await client.call_tool("read", {"path": str(s.store / "toolfold.db")})
    assert result.is_error and SECRET not in text_of(result)
    assert "is hidden by the workspace-write sandbox" in text_of(result)
    assert refused.is_error and "is hidden by the workspace-write sandbox" in text_of(refused)
