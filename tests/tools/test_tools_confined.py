"""read and grep in a sandboxed exec env obey the command's path rules: hidden secrets,
links out of the view and the host's /tmp are refused; the workspace and the env's own
spill files are read as usual."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sandbox_fixture import SECRET
from toolfold.execenv import LocalExecEnv, Sandbox
from toolfold.harness import EventBus, ToolContext, ToolResult, execute_tool_call
from toolfold.tools import GREP, READ


async def call(tool: Any, args: dict[str, Any], ws: Path, env: LocalExecEnv) -> ToolResult:
    context = ToolContext(env=env, cwd=ws)
    return await execute_tool_call(
        tool, "c1", args, run_id="r", turn_id="t", bus=EventBus(), context=context
    )


def text(result: ToolResult) -> str:
    return result.text


@pytest.fixture
def ws(host_dir: Path, fake_home: Path) -> Path:
    ws = host_dir / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello notes\n")
    (ws / "key").symlink_to(fake_home / ".ssh" / "id_ed25519")
    return ws


@pytest.mark.parametrize("profile", ["read-only", "workspace-write"])
async def test_read_refuses_what_the_command_cannot_see(
    ws: Path, fake_home: Path, tmp_path: Path, profile: str
) -> None:
    env = LocalExecEnv(ws.parent / "spill", sandbox=Sandbox(profile))  # type: ignore[arg-type]
    (tmp_path / "hosttmp.txt").write_text(SECRET)
    ok = await call(READ, {"path": "notes.txt"}, ws, env)
    assert "hello notes" in text(ok)
    for path, why in [
        (str(fake_home / ".ssh" / "id_ed25519"), "is hidden by the"),
        (str(fake_home / ".aws" / "credentials"), "is hidden by the"),
        ("key", "is hidden by the"),  # a link from the workspace to a secret
        (str(tmp_path / "hosttmp.txt"), "commands have a private /tmp"),
    ]:
        result = await call(READ, {"path": path}, ws, env)
        assert result.is_error, path
        assert SECRET not in text(result)
        assert why in text(result) and f"{profile} sandbox" in text(result)
    # Unconfined, the same read shows the secret: the refusal above is the sandbox's.
    plain = await call(READ, {"path": "key"}, ws, LocalExecEnv(ws.parent / "spill"))
    assert SECRET in text(plain)


async def test_grep_skips_hidden_files_and_refuses_a_hidden_root(ws: Path, fake_home: Path) -> None:
    env = LocalExecEnv(ws.parent / "spill", sandbox=Sandbox("workspace-write"))
    found = await call(GREP, {"pattern": "PLANTED|hello", "path": str(fake_home.parent)}, ws, env)
    assert "hello notes" in text(found)
    assert SECRET not in text(found)
    refused = await call(GREP, {"pattern": "PLANTED", "path": str(fake_home / ".ssh")}, ws, env)
    assert refused.is_error and "is hidden by the workspace-write sandbox" in text(refused)


async def test_read_pages_the_envs_own_spill_files(ws: Path) -> None:
    env = LocalExecEnv(
        ws.parent / "store" / "spill" / "s1",
        sandbox=Sandbox("workspace-write", hidden=(str(ws.parent / "store"),)),
    )
    result = await env.exec("seq 1 100000", cwd=ws)
    assert result.spill_path is not None
    paged = await call(READ, {"path": result.spill_path, "offset": 99999}, ws, env)
    assert not paged.is_error and "99999\n100000" in text(paged)
    other = ws.parent / "store" / "toolfold.db"
    other.write_text("store\n")
    refused = await call(READ, {"path": str(other)}, ws, env)
    assert refused.is_error and "is hidden by the workspace-write sandbox" in text(refused)
