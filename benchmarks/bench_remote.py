"""Remote exec: truncation at the source (``RemoteExecEnv`` over ssh) vs shipping the raw
stream back and truncating locally (``ssh host cmd`` captured by a local ``LocalExecEnv``).

Run: .venv/bin/python benchmarks/bench_remote.py [--size BYTES] [--quick]

Starts a real sshd on a loopback port (tests/sshd_fixture.py: keys generated into a temp
dir; needs root and openssh-server, like the tests). For each workload, back to back in
child processes (so each one's peak memory is its own):

- **at the source**: ``RemoteExecEnv(SSHTransport(...)).exec(cmd)`` — the exec host on the
  other side captures, windows and spills; only bounded updates come back;
- **raw stream back**: ``LocalExecEnv().exec("ssh host cmd")`` — what remote runtimes
  commonly do: every byte crosses, the same capture then windows and spills it here.

"Bytes over the transport" is what ssh delivered on its stdout (the decrypted payload:
protocol lines for the first, the raw output for the second); TCP and encryption overhead
are not counted (they grow both columns alike). Peak RSS is VmHWM of the client process
above its idle VmHWM after imports. Both sides run on this one 2-core machine, so the
exec host, sshd, ssh and the client compete for CPU: read the ratios, not the MB/s.
Not measured: a real network (loopback has no bandwidth limit or latency; over a slow
link the raw stream's time grows with its bytes, the bounded one's does not), the remote
side's disk (the spill file is written there in the first case, here in the second).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from sshd_fixture import SSHServer, start_sshd

CHILD = r"""
import asyncio, json, sys
from pathlib import Path

def hwm(pid="self"):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no VmHWM")

from toolfold.execenv import LocalExecEnv, RemoteExecEnv, SSHTransport
args = json.loads(sys.argv[1])
idle = hwm()

async def main():
    loop = asyncio.get_running_loop()
    updates = []
    if args["mode"] == "source":
        transport = SSHTransport(args["destination"], options=args["options"],
                                 remote_command=args["remote_command"])
        async with RemoteExecEnv(transport, spill_dir=args["spill_dir"]) as env:
            started = loop.time()
            r = await env.exec(args["command"], on_update=updates.append)
            seconds = loop.time() - started
            wire = env.bytes_received
            host_peak = hwm(env.host.pid)  # the exec host runs on this machine (loopback)
    else:
        env = LocalExecEnv(Path(args["spill_dir"]))
        ssh = ["ssh", "-T", "-o", "BatchMode=yes", *args["options"], args["destination"], "--",
               args["command"]]
        started = loop.time()
        r = await env.exec(" ".join(map(__import__("shlex").quote, ssh)), on_update=updates.append)
        seconds = loop.time() - started
        wire = r.truncation.total_bytes  # every byte of output came through ssh's stdout
        host_peak = 0
    Path(r.spill_path).unlink()
    return {"seconds": seconds, "wire": wire, "total": r.truncation.total_bytes,
            "updates": len(updates), "exit": r.exit_code, "host_peak": host_peak}

out = asyncio.run(main())
out["rss_growth"] = hwm() - idle
print(json.dumps(out))
"""


def run(
    mode: str, server: SSHServer, command: str, spill_dir: str, remote_command: str
) -> dict[str, float]:
    args = {
        "mode": mode,
        "destination": server.destination,
        "options": server.options,
        "remote_command": remote_command,
        "spill_dir": spill_dir,
        "command": command,
    }
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} run failed: {proc.stderr}")
    result: dict[str, float] = json.loads(proc.stdout)
    if result["exit"] != 0:
        raise SystemExit(f"{mode} run: command exited {result['exit']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000_000, help="bytes of output per run")
    parser.add_argument("--quick", action="store_true", help="100 MB instead of --size")
    opts = parser.parse_args()
    size = 100_000_000 if opts.quick else opts.size
    workloads = [
        ("short lines", f"yes 'a line of output' | head -c {size}"),
        ("100-byte lines", f"head -c {size} /dev/zero | tr '\\0' a | fold -w 100"),
    ]
    exec_host = shlex.join([sys.executable, "-m", "toolfold.cli", "exec-host"])
    print(f"{size:,} bytes of output per run; window 50 KiB / 2000 lines (tail), spill on\n")
    print(
        "| workload | approach | seconds | bytes over the transport | updates | "
        "client peak RSS above idle MB | exec host peak RSS MB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as d, start_sshd(Path(d) / "sshd") as server:
        for name, command in workloads:
            rows = {}
            for mode, label in (
                ("source", "at the source (RemoteExecEnv)"),
                ("raw", "raw stream back (ssh, local capture)"),
            ):
                r = run(mode, server, command, str(Path(d) / mode), exec_host)
                if r["total"] < size:
                    raise SystemExit(f"{mode}: captured {r['total']} bytes, expected >= {size}")
                rows[mode] = r
                host = f"{r['host_peak'] / 2**20:.1f}" if mode == "source" else "(none)"
                print(
                    f"| {name} | {label} | {r['seconds']:.1f} | {int(r['wire']):,} | "
                    f"{int(r['updates'])} | {r['rss_growth'] / 2**20:.1f} | {host} |"
                )
            s, raw = rows["source"], rows["raw"]
            if s["total"] != raw["total"]:
                raise SystemExit(f"totals differ: {s['total']} at the source, {raw['total']} raw")
            print(
                f"| {name} | **ratio raw / at the source** | {raw['seconds'] / s['seconds']:.2f}x time | "
                f"{raw['wire'] / s['wire']:,.0f}x bytes | | | |"
            )


if __name__ == "__main__":
    main()
