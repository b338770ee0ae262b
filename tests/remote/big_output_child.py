"""Runs one big command through RemoteExecEnv over ssh in a process of its own, so its
peak memory can be measured; prints the transport and memory figures as JSON.

Used by tests/remote/test_remote_ssh.py (benchmarks/bench_remote.py has its own child).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from toolfold.execenv import (
    CaptureOptions,
    RemoteExecEnv,
    ShellOutputLimits,
    ShellOutputUpdate,
    SSHTransport,
)


def peak_rss(pid: str = "self") -> int:
    """VmHWM (peak resident set) of a process, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc status")


async def main(args: dict[str, object]) -> dict[str, object]:
    transport = SSHTransport(
        str(args["destination"]),
        options=[str(o) for o in args["options"]],  # type: ignore[attr-defined]
        remote_command=str(args["remote_command"]),
    )
    updates: list[int] = []

    def count(update: ShellOutputUpdate) -> None:
        updates.append(1)

    async with RemoteExecEnv(transport, spill_dir=str(args["spill_dir"])) as env:
        host = env.host
        assert host is not None
        before = peak_rss()
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await env.exec(
            str(args["command"]),
            capture=CaptureOptions(limits=ShellOutputLimits(max_bytes=int(str(args["max_bytes"])))),
            on_update=count,
        )
        elapsed = loop.time() - started
        host_peak = peak_rss(str(host.pid))  # the exec host runs on this machine (loopback)
    return {
        "exit_code": result.exit_code,
        "total_bytes": result.truncation.total_bytes,
        "spill_path": result.spill_path,
        "updates": len(updates),
        "bytes_received": env.bytes_received,
        "bytes_sent": env.bytes_sent,
        "client_peak_growth": peak_rss() - before,
        "host_peak": host_peak,
        "seconds": elapsed,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
