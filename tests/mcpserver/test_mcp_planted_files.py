"""Links planted where ``toolfold mcp proxy`` writes (its upstream's stderr log and its
spill directory) are refused: the proxy writes nothing through them, and quotes nothing
read through them. The attacker can write the directory the store lives in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import TOOLFOLD, clean_env, proxy, session_on, store_url

UPSTREAM = str(Path(__file__).with_name("exiting_upstream.py"))


async def test_a_link_planted_at_the_upstream_stderr_log_is_not_followed(
    tmp_path: Path,
) -> None:
    spill = tmp_path / "store" / "spill"
    spill.mkdir(parents=True)
    loot = tmp_path / "attacker.log"
    loot.write_text("the attacker's file\n")
    log = spill / "p1.upstream-stderr.log"
    log.symlink_to(loot)
    with anyio.fail_after(60):
        async with session_on(proxy(tmp_path, sys.executable, UPSTREAM), tmp_path / "p.err") as c:
            with pytest.raises(MCPError) as refused:
                await c.list_tools()
    message = refused.value.error.message
    assert (
        f"could not start: refusing {log}: it is a symbolic link (to '{loot}'); toolfold "
        "follows no link it did not create; remove it or choose another path"
    ) in message
    assert "the attacker's file" not in message  # its "stderr tail" is not quoted either
    assert loot.read_text() == "the attacker's file\n"


@pytest.mark.parametrize("command", [("mcp", "proxy"), ("mcp",)])
def test_a_link_planted_at_the_session_spill_directory_is_refused_at_start(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    spill = tmp_path / "store" / "spill"
    spill.mkdir(parents=True)
    attacker = tmp_path / "attacker"
    attacker.mkdir()
    (spill / "p1").symlink_to(attacker, target_is_directory=True)
    upstream = ("--", sys.executable, UPSTREAM) if command[-1] == "proxy" else ()
    done = subprocess.run(
        [*TOOLFOLD, *command, "--store", store_url(tmp_path), "--session", "p1", *upstream],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        f"toolfold: error: refusing {spill / 'p1'}: it is a symbolic link (to '{attacker}'); "
        "toolfold follows no link it did not create; remove it or choose another path\n"
    ), done.stderr
    assert list(attacker.iterdir()) == []
