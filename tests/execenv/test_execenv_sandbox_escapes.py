"""Escape attempts through bash in each sandbox profile (real bwrap, real processes):
each is refused with the OS's ordinary error, and the host shows nothing changed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sandbox_escapes import ATTEMPTS, SECRET, Attempt, no_escape_marker, scene, snapshot
from toolfold.execenv import LocalExecEnv, Sandbox

BOUND = 60.0


@pytest.mark.parametrize("profile", ["read-only", "workspace-write"])
@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda a: a.name)
async def test_an_escape_attempt_is_refused(
    attempt: Attempt,
    profile: str,
    host_dir: Path,
    fake_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLFOLD_TOKEN", SECRET)  # in the environment the command inherits
    monkeypatch.setenv("DEPLOY_API_KEY", SECRET)
    with scene(host_dir, fake_home, profile) as s:
        env = LocalExecEnv(
            s.spill,
            sandbox=Sandbox(profile, hidden=(str(s.store),)),
            kill_grace=0.5,  # type: ignore[arg-type]
        )
        before = snapshot(host_dir)
        result = await asyncio.wait_for(env.exec(attempt.command(s), cwd=s.ws), BOUND)
        attempt.check(s, result.text)
        assert SECRET not in result.text
        after = snapshot(host_dir)
        if profile == "workspace-write":  # the workspace is the command's to change
            before = {k: v for k, v in before.items() if not k.startswith("ws/")}
            after = {k: v for k, v in after.items() if not k.startswith("ws/")}
        assert after == before
        no_escape_marker(host_dir)


async def test_the_workspace_is_writable_and_the_network_there_when_asked(
    host_dir: Path, fake_home: Path
) -> None:
    with scene(host_dir, fake_home, "workspace-write") as s:
        box = Sandbox("workspace-write", writable=(str(s.outside),), network=True)
        env = LocalExecEnv(s.spill, sandbox=box)
        command = (
            f"echo made > made; echo more >> {s.outside}/data; "
            f"exec 3<>/dev/tcp/127.0.0.1/{s.port} && echo CONNECTED"
        )
        result = await asyncio.wait_for(env.exec(command, cwd=s.ws), BOUND)
    assert result.text == "CONNECTED\n" and result.exit_code == 0
    assert (s.ws / "made").read_text() == "made\n"
    assert (s.outside / "data").read_text() == "outside\nmore\n"
    assert s.accepted == [1]
