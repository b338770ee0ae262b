"""``toolfold mcp proxy`` against a hostile upstream: the proxy's peak RSS under each
flood and for one large result.

    .venv/bin/python benchmarks/bench_proxy_bounds.py [--only NAME ...] [--src DIR]

The upstream is ``tests/mcpserver/hostile_upstream.py`` (JSON-RPC written by hand, so
it can flood, and results are written piece by piece without being held). Each
scenario runs a new proxy process (``python -m toolfold.cli mcp proxy``) driven by the
official SDK client, and reads the proxy's peak RSS (``VmHWM``) from /proc before
the client hangs up:

- ``logs+progress``: one call during which the upstream sends 200,000 log
  notifications and 100,000 progress notifications (the client reads everything);
- ``stalled``: a client that sends one call and then stops reading its stdin for
  10 s, while the upstream sends 200,000 log notifications (raw pipes, not the SDK
  client, which always reads);
- ``requests``: 20,000 ``sampling/createMessage`` and 20,000 ``elicitation/create``
  requests from the upstream, each answered by the client at once;
- ``text-64``, ``text-128``, ``text-200``: one text result of that many MB;
- ``image-200``: one 200 MB image block.

``--src DIR`` runs the proxy from another checkout's ``src`` (the "before" column of
docs/BENCHMARKS.md came from the commit before the bounds, checked out with
``git worktree add``). Not measured: the upstream's or the client's memory, wall
time (the figures are memory bounds; a run takes a few minutes), HTTP upstreams
(``bench_mcp_proxy_cap.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parent.parent
HOSTILE = ROOT / "tests" / "mcpserver" / "hostile_upstream.py"
MB = 1_000_000


def peak_rss(marker: str) -> int:
    """VmHWM of the proxy process, found by the session name on its command line."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or proc.name == str(os.getpid()):
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
            if marker in cmdline and "toolfold.cli" in cmdline:
                for line in (proc / "status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            continue
    return 0


def proxy_args(store: str, session: str) -> list[str]:
    return [
        "-m",
        "toolfold.cli",
        "mcp",
        "proxy",
        "--store",
        store,
        "--session",
        session,
        "--",
        sys.executable,
        str(HOSTILE),
    ]


def env_for(src: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLFOLD_STORE"}
    if src:
        env["PYTHONPATH"] = src
    return env


async def with_client(
    store: str,
    src: str | None,
    run: Callable[[ClientSession], Awaitable[str]],
    **callbacks: Any,
) -> tuple[int, str]:
    session = f"bench-{uuid.uuid4().hex[:12]}"
    params = StdioServerParameters(
        command=sys.executable, args=proxy_args(store, session), env=env_for(src)
    )
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (r, w),
            ClientSession(r, w, **callbacks) as client,
        ):
            await client.initialize()
            said = await run(client)
            return peak_rss(session), said


def text(result: types.CallToolResult) -> str:
    block = result.content[0] if result.content else None
    return (block.text if isinstance(block, types.TextContent) else "")[:80].replace("\n", " ")


async def logs_and_progress(store: str, src: str | None) -> tuple[int, str]:
    async def progress(value: float, total: float | None, message: str | None) -> None:
        return None

    async def run(client: ClientSession) -> str:
        args = {"logs": 200_000, "progress": 100_000}
        return text(await client.call_tool("flood", args, progress_callback=progress))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        return None

    return await with_client(store, src, run, logging_callback=on_log)


async def requests(store: str, src: str | None) -> tuple[int, str]:
    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        content = types.TextContent(type="text", text="ok")
        return types.CreateMessageResult(role="assistant", content=content, model="m")

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def run(client: ClientSession) -> str:
        args = {"sampling": 20_000, "elicitation": 20_000}
        return text(await client.call_tool("ask_client", args))

    return await with_client(
        store, src, run, sampling_callback=sampling, elicitation_callback=elicit
    )


def result_of(size: int, kind: str) -> Callable[[str, str | None], Awaitable[tuple[int, str]]]:
    async def scenario(store: str, src: str | None) -> tuple[int, str]:
        async def run(client: ClientSession) -> str:
            return text(await client.call_tool("blob", {"size": size, "kind": kind}))

        return await with_client(store, src, run)

    return scenario


async def stalled(store: str, src: str | None) -> tuple[int, str]:
    session = f"bench-{uuid.uuid4().hex[:12]}"
    proc = subprocess.Popen(
        [sys.executable, *proxy_args(store, session)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env_for(src),
    )
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    try:
        init = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "stalled", "version": "1"},
        }
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init})
        proc.stdout.readline()
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "flood", "arguments": {"logs": 200_000}}
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        time.sleep(10)  # the client reads nothing meanwhile
        return peak_rss(session), "stalled for 10 s"
    finally:
        proc.kill()
        proc.wait()


SCENARIOS: dict[str, Callable[[str, str | None], Awaitable[tuple[int, str]]]] = {
    "logs+progress": logs_and_progress,
    "stalled": stalled,
    "requests": requests,
    "text-64": result_of(64 * MB, "text"),
    "text-128": result_of(128 * MB, "text"),
    "text-200": result_of(200 * MB, "text"),
    "image-200": result_of(200 * MB, "image"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), help="scenarios to run")
    parser.add_argument("--src", help="run the proxy from this src directory")
    opts = parser.parse_args()
    print(f"{'scenario':14} {'proxy peak RSS':>14}  what the client got")
    with tempfile.TemporaryDirectory(prefix="bench-bounds-") as tmp:
        store = f"sqlite:{tmp}/toolfold.db"
        for name in opts.only or SCENARIOS:
            rss, said = anyio.run(SCENARIOS[name], store, opts.src)
            print(f"{name:14} {rss / 2**20:10.0f} MiB  {said}", flush=True)


if __name__ == "__main__":
    main()
