"""The container transport against a real container runtime: ``podman exec -i`` into a
running podman container (runc), ``toolfold exec-host`` inside it.

No image registry is reachable here, so the container's root is this machine's own
file system as a copy-on-write overlay (``--rootfs /:O``): the venv's toolfold runs
inside, and what a command writes there (its spill file included) stays in the
container's upper layer, never on the host. Its network is ``none``. ``podman`` and
``runc`` come from Debian's packages (``dev.py`` installs them); the container runs
with ``default_ulimits = []`` (a machine whose own limits cannot be raised refuses
podman's defaults) under ``runc`` (crun refuses this machine's mix of cgroup v1 and v2).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolfold.execenv import (
    CaptureOptions,
    CommandTransport,
    RemoteExecEnv,
    ShellOutputLimits,
    ShellOutputUpdate,
)

BOUND = 120.0


@pytest.fixture
def container(tmp_path: Path) -> Iterator[str]:
    """A running podman container; its ``podman exec -i`` prefix is yielded."""
    conf = tmp_path / "containers.conf"
    conf.write_text("[containers]\ndefault_ulimits = []\n")
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    name = f"toolfold-test-{uuid.uuid4().hex[:8]}"
    podman = ["podman", "--runtime", "runc"]
    subprocess.run(
        [*podman, "run", "-d", "--name", name, "--network", "none",
         "--rootfs", "/:O", "sleep", "100000"],
        check=True, env=env, capture_output=True, timeout=BOUND,
    )  # fmt: skip
    try:
        yield f"env CONTAINERS_CONF={shlex.quote(str(conf))} podman --runtime runc exec -i {name}"
    finally:
        subprocess.run(
            [*podman, "rm", "-f", "-t", "0", name], env=env, capture_output=True, timeout=BOUND
        )


def transport(prefix: str) -> CommandTransport:
    remote = shlex.join(
        [sys.executable, "-m", "toolfold.cli", "exec-host", "--spill-dir", "/root/toolfold-spill"]
    )
    return CommandTransport(prefix, remote_command=remote)


async def test_a_command_runs_in_the_container_bounded_with_its_spill_there(
    container: str,
) -> None:
    small = CaptureOptions(limits=ShellOutputLimits(max_bytes=2000, max_lines=40))
    updates: list[ShellOutputUpdate] = []
    async with RemoteExecEnv(transport(container), spill_dir="s1") as env:
        result = await asyncio.wait_for(
            env.exec(
                "seq 1 100000; tr '\\0' ' ' < /proc/1/cmdline; echo",
                capture=small,
                on_update=updates.append,
            ),
            BOUND,
        )
        assert env.host is not None and env.host.spill_dir == "/root/toolfold-spill"
    assert result.exit_code == 0
    assert result.truncation.total_lines == 100001
    assert result.text.endswith("sleep 100000 \n")  # pid 1 is the container's own
    assert result.spill_path is not None and result.spill_path.startswith(
        "/root/toolfold-spill/s1/"
    )
    assert not Path(result.spill_path).exists()  # written in the container, not on the host
    assert updates


async def test_cancel_kills_the_command_inside_the_container(container: str) -> None:
    cancel = asyncio.Event()
    seen: list[ShellOutputUpdate] = []

    def on_update(u: ShellOutputUpdate) -> None:
        seen.append(u)
        cancel.set()

    async with RemoteExecEnv(transport(container)) as env:
        result = await asyncio.wait_for(
            env.exec("echo started; exec sleep 1000", cancel=cancel, on_update=on_update), BOUND
        )
        assert result.cancelled and result.exit_code is None and result.text == "started\n"
        left = await asyncio.wait_for(env.exec("pgrep -c -x sleep"), BOUND)
    assert left.text == "1\n"  # only the container's pid 1 sleeps: the command's sleep is gone
