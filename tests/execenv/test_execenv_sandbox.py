"""Sandbox: the bwrap argv, the environment filter, the availability check and a real
confined run (real bwrap, real processes)."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from toolfold.execenv import ExecConfigError, LocalExecEnv, Sandbox
from toolfold.execenv._reaper import EXEC_ID_VAR
from toolfold.execenv._sandbox import unavailable

BOUND = 60.0


def test_profiles_and_arguments_are_checked() -> None:
    with pytest.raises(
        ExecConfigError, match="profile must be one of read-only, workspace-write, got 'rw'"
    ):
        Sandbox("rw")  # type: ignore[arg-type]
    with pytest.raises(ExecConfigError, match="writable paths need the workspace-write profile"):
        Sandbox("read-only", writable=("/srv",))
    with pytest.raises(ExecConfigError, match="writable must be a sequence of str"):
        Sandbox("workspace-write", writable="/srv")  # type: ignore[arg-type]
    with pytest.raises(ExecConfigError, match="sandbox must be a Sandbox or None"):
        LocalExecEnv("/nonexistent", sandbox="read-only")  # type: ignore[arg-type]


def test_a_missing_writable_path_is_named(tmp_path: Path) -> None:
    box = Sandbox("workspace-write", writable=(str(tmp_path / "nope"),))
    with pytest.raises(ExecConfigError, match=r"writable path '.*/nope' does not exist"):
        box.argv(["true"], cwd=str(tmp_path))


async def test_a_workspace_at_the_root_is_refused(tmp_path: Path) -> None:
    env = LocalExecEnv(tmp_path / "spill", sandbox=Sandbox("workspace-write"))
    with pytest.raises(ExecConfigError, match="started in / would leave the whole file system"):
        await env.exec("touch /escaped", cwd="/")
    assert not Path("/escaped").exists()
    ro = LocalExecEnv(tmp_path / "spill", sandbox=Sandbox("read-only"))
    result = await asyncio.wait_for(ro.exec("pwd", cwd="/"), BOUND)
    assert result.text == "/\n"


def test_secret_environment_is_removed_unless_kept() -> None:
    env = {
        "PATH": "/usr/bin",
        "TOOLFOLD_TOKEN": "t",
        "OPENAI_API_KEY": "k",
        "GITHUB_TOKEN": "g",
        "github_token": "g2",
        "AWS_SECRET_ACCESS_KEY": "a",
        "SSH_AUTH_SOCK": "/run/agent",
        "TOKENIZERS_PARALLELISM": "false",
        EXEC_ID_VAR: "marker",
    }
    assert Sandbox().env(env) == {
        "PATH": "/usr/bin",
        "TOKENIZERS_PARALLELISM": "false",
        EXEC_ID_VAR: "marker",
    }
    kept = Sandbox(keep_env=("GITHUB_TOKEN",)).env(env)
    assert kept["GITHUB_TOKEN"] == "g" and "OPENAI_API_KEY" not in kept


def test_hidden_paths_come_after_the_binds_so_they_cover_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".netrc").write_text("machine x password y\n")
    monkeypatch.setenv("HOME", str(home))
    store = home / "ws" / ".toolfold"
    store.mkdir(parents=True)
    # The workspace is the home directory itself: the secrets in it must stay hidden.
    args = Sandbox("workspace-write", hidden=(str(store),)).argv(["sh"], cwd=str(home))
    bind = args.index("--bind")
    assert args[bind + 1 : bind + 3] == [str(home)] * 2
    assert args.index(str(home / ".ssh")) > bind
    assert args[args.index(str(store)) - 1] == "--tmpfs" and args.index(str(store)) > bind
    assert args[args.index(str(home / ".netrc")) - 2 :][:2] == ["--ro-bind", "/dev/null"]
    assert "--share-net" not in args and "--unshare-all" in args and "--die-with-parent" in args
    assert args[-2:] == ["--", "sh"]
    assert "--share-net" in Sandbox(network=True).argv(["sh"], cwd=str(home))


def test_missing_bwrap_names_the_package() -> None:
    problem = unavailable("/nonexistent/bwrap")
    assert problem is not None and "install the package bubblewrap" in problem
    with pytest.raises(ExecConfigError) as info:
        LocalExecEnv("/nonexistent/spill", sandbox=Sandbox(bwrap="/nonexistent/bwrap"))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "cannot confine commands: '/nonexistent/bwrap' (bubblewrap) is not installed"
    )
    assert message.endswith("or run them unconfined explicitly (--sandbox off, or sandbox=None)")


def test_disabled_user_namespaces_name_the_sysctl(tmp_path: Path) -> None:
    (tmp_path / "user").mkdir()
    (tmp_path / "user" / "max_user_namespaces").write_text("0\n")
    problem = unavailable("bwrap", proc_sys=str(tmp_path))
    assert problem is not None and "sysctl user.max_user_namespaces=0" in problem


def test_a_bwrap_that_cannot_create_namespaces_says_which_sysctls(tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        '#!/bin/sh\ncase "$1" in --help) exit 0;; esac\n'
        "echo 'bwrap: No permissions to creating new namespace, likely because the kernel "
        "does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(stat.S_IRWXU)
    problem = unavailable(str(fake), proc_sys=str(tmp_path))
    assert problem is not None
    assert "cannot create namespaces (bwrap: No permissions to creating new namespace" in problem
    assert "user.max_user_namespaces and kernel.unprivileged_userns_clone" in problem


def test_this_host_can_confine() -> None:
    assert unavailable() is None  # dev.py installs bubblewrap


async def test_a_confined_command_writes_its_workspace_only(tmp_path: Path, host_dir: Path) -> None:
    ws = host_dir / "ws"
    ws.mkdir()
    env = LocalExecEnv(tmp_path / "spill", sandbox=Sandbox("workspace-write"))
    result = await asyncio.wait_for(
        env.exec(
            f"echo in > inside; echo out > {host_dir}/outside; echo $FOO_TOKEN; echo ${EXEC_ID_VAR}",
            cwd=ws,
            env={**os.environ, "FOO_TOKEN": "s3cret"},
        ),
        BOUND,
    )
    assert (ws / "inside").read_text() == "in\n"
    assert not (host_dir / "outside").exists()
    assert f"{host_dir}/outside: Read-only file system" in result.text
    assert "s3cret" not in result.text
    assert len(result.text.splitlines()[-1]) == 16  # the marker survived the filter
    assert stat.S_IMODE((tmp_path / "spill").stat().st_mode) == 0o700
