"""One call of a large output through ``toolfold mcp``, trees side by side, cold or warm.

    .venv/bin/python benchmarks/bench_big_call.py --trees SRC[,SRC...] [--mb 25]
        [--rounds 1] [--cold] [-- SERVER OPTIONS...]

Each tree (a source directory, ``src`` of this checkout or of an older one made with
``git archive COMMIT src | tar -x -C /tmp/old``) gets a ``toolfold mcp`` server of its
own, in a directory of its own, importing toolfold from that tree (``PYTHONPATH``). Then,
round by round, each server in the order given runs ``seq -f '%09g' 1 N`` (``--mb`` MB
of output) as one ``bash`` call; the time from sending the call to holding its result
is reported per tree, min and median over the rounds. ``--cold``: no warm-up call, so
with ``--rounds 1`` the big call is each server's first (what ``bench_mcp.py``'s "total"
column measures). Options after ``--`` go to every server (``--sandbox off``).

Why it exists: ``bench_mcp.py`` starts its servers in a fixed order (this tree's before
the ``--before`` tree's), and in fresh servers whichever makes its big call first pays
more (~25-30 ms here, whichever tree it is). Run it twice with the trees swapped to
tell a change from that order.

Not measured: peak memory, progress messages, the bytes the client receives
(``bench_mcp.py`` has them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


async def run(trees: list[str], mb: int, rounds: int, cold: bool, extra: list[str]) -> None:
    command = f"seq -f '%09g' 1 {mb * 100_000}"
    with tempfile.TemporaryDirectory(prefix="bench-big-call-") as tmp:
        async with AsyncExitStack() as stack:
            clients = []
            for i, tree in enumerate(trees):
                home = Path(tmp) / str(i)
                home.mkdir()
                params = StdioServerParameters(
                    command=sys.executable,
                    args=[
                        "-m",
                        "toolfold.cli",
                        "mcp",
                        "--store",
                        f"sqlite:{home / 's.db'}",
                        *extra,
                    ],
                    cwd=str(home),
                    env={**os.environ, "PYTHONPATH": tree},
                )
                errlog = stack.enter_context((home / "server.err").open("w"))
                r, w = await stack.enter_async_context(stdio_client(params, errlog=errlog))
                client = await stack.enter_async_context(ClientSession(r, w))
                await client.initialize()
                if not cold:
                    await client.call_tool("bash", {"command": "true"})
                clients.append(client)
            times: list[list[float]] = [[] for _ in trees]
            for _ in range(rounds):
                for i, client in enumerate(clients):
                    start = time.perf_counter()
                    await client.call_tool("bash", {"command": command})
                    times[i].append(time.perf_counter() - start)
    print(f"`{command}`, {rounds} round(s), {'cold' if cold else 'warm'}, servers in this order:")
    for tree, got in zip(trees, times, strict=True):
        print(f"- {tree}: min {min(got):.3f} s, median {statistics.median(got):.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trees", required=True, help="comma-separated source directories")
    parser.add_argument("--mb", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cold", action="store_true", help="no warm-up call")
    parser.add_argument("extra", nargs="*", help="options for every server (after --)")
    args = parser.parse_args()
    trees = [str(Path(t).resolve()) for t in args.trees.split(",")]
    anyio.run(run, trees, args.mb, args.rounds, args.cold, args.extra)


if __name__ == "__main__":
    main()
