"""``toolfold mcp proxy --upstream-url``: peak memory for one large result from a
Streamable HTTP upstream, the SDK client directly against through the proxy.

    .venv/bin/python benchmarks/bench_mcp_proxy_cap.py [--mb 64] [--cap-mb 8]

The upstream is ``tests/mcpserver/http_upstream.py`` (the official SDK's server)
answering with JSON bodies; its ``blob`` tool returns ``--mb`` MB of text. Each
client runs in its own process and its peak RSS (``VmHWM``) is read from /proc:

- the SDK's ``streamable_http_client`` + ``ClientSession`` calling the upstream
  directly (what a client without the proxy holds);
- a ``ClientSession`` through ``toolfold mcp proxy`` with ``--max-message-bytes``
  of ``--cap-mb`` MB (the result is over the cap: an error result) and with the
  default 256 MiB cap (the result is windowed and spilled): the proxy's own peak.

Also reported: the wall time of the call and the bytes of the result the client got.
Not measured: event streams (the SDK client alone fails any event over 1 MiB, so it
has no large-result figure to set beside), the upstream's memory, the client's
memory behind the proxy (it gets at most the window).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "mcpserver" / "http_upstream.py"

DIRECT = """
import json, sys, time, anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

async def main():
    async with streamable_http_client(sys.argv[1]) as (r, w), ClientSession(r, w) as c:
        await c.initialize()
        t0 = time.perf_counter()
        result = await c.call_tool("blob", {"size": int(sys.argv[2])})
        took = time.perf_counter() - t0
    size = len(result.model_dump_json(by_alias=True, exclude_none=True))
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            rss = int(line.split()[1]) * 1024
    print(json.dumps({"rss": rss, "time": took, "bytes": size, "error": bool(result.is_error)}))

anyio.run(main)
"""

PROXIED = """
import json, sys, time, anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

def peak(marker):
    import os, pathlib
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue  # this client's own command line (/proc/self too) holds the marker
        try:
            if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0

async def main():
    url, size, store, session, cap = sys.argv[1:6]
    args = ["-m", "toolfold.cli", "mcp", "proxy", "--store", store, "--session", session,
            "--upstream-url", url, "--max-message-bytes", cap]
    params = StdioServerParameters(command=sys.executable, args=args)
    async with stdio_client(params, errlog=open("/dev/null", "w")) as (r, w), \\
            ClientSession(r, w) as c:
        await c.initialize()
        t0 = time.perf_counter()
        result = await c.call_tool("blob", {"size": int(size)})
        took = time.perf_counter() - t0
        rss = peak(session)
    size = len(result.model_dump_json(by_alias=True, exclude_none=True))
    print(json.dumps({"rss": rss, "time": took, "bytes": size, "error": bool(result.is_error)}))

anyio.run(main)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child(code: str, *args: str) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLFOLD_STORE"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="result size in MB")
    parser.add_argument("--cap-mb", type=int, default=8, help="--max-message-bytes in MB")
    opts = parser.parse_args()
    size = opts.mb * 1_000_000
    port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, str(UPSTREAM), "json"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(600):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        with tempfile.TemporaryDirectory(prefix="bench-cap-") as tmp:
            store = f"sqlite:{tmp}/toolfold.db"
            tag = uuid.uuid4().hex  # the session name finds the proxy's process in /proc
            rows = [
                ("SDK client, direct", child(DIRECT, url, str(size))),
                (
                    f"through the proxy, cap {opts.cap_mb} MB",
                    child(
                        PROXIED,
                        url,
                        str(size),
                        store,
                        f"capped-{tag}",
                        str(opts.cap_mb * 1_000_000),
                    ),
                ),
                (
                    "through the proxy, default cap (256 MiB)",
                    child(PROXIED, url, str(size), store, f"default-{tag}", str(256 * 1024 * 1024)),
                ),
            ]
    finally:
        upstream.kill()
        upstream.wait()
    direct = rows[0][1]["rss"]
    print(f"one {opts.mb} MB result from a Streamable HTTP upstream (JSON body)")
    print(f"{'client':44} {'peak RSS':>10} {'vs direct':>9} {'time':>7} {'bytes out':>11} error")
    for name, r in rows:
        print(
            f"{name:44} {r['rss'] / 2**20:7.0f} MiB {r['rss'] / direct:8.2f}x "
            f"{r['time']:6.2f}s {int(r['bytes']):11,} {bool(r['error'])}"
        )


if __name__ == "__main__":
    main()
