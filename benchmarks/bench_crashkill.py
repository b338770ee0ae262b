"""Crash-kill at scale: many more kill points than CI runs, per backend, with the count
and the invariant violations found (target: 0).

Run: ``.venv/bin/python benchmarks/bench_crashkill.py [--points N]`` (default 500 per
backend). Uses the suite's child and checker (tests/durability/crashkill_*.py): a
fork-server child runs bash (spilling), a memoising multi-step tool and a details-heavy
tool on JSONL or SQLite while it streams a durable assistant message (thinking, text,
tool-call argument deltas), then makes three short calls as ``toolfold mcp`` does (leased,
host record with the lease and the settlement, output written once by the settlement),
and SIGKILLs itself at storage call #k — on JSONL every other
pass first cuts commit #k's record short (a torn write) — then the store is reopened,
the operation resumed and the four invariants of docs/durability.md are checked — for
the message: recovery shows its last checkpoint, resume settles it once (interrupted,
that text kept; or whole if its settlement had committed).
Also runs the two ordered memo designs docs/durability.md rejects, to show they are caught.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "durability"))
sys.path.insert(0, str(ROOT / "tests"))

from crashkill_check import ForkServer, run_points  # noqa: E402


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=500, help="kill points per backend")
    parser.add_argument(
        "--backends", default="jsonl,sqlite,postgres", help="comma-separated backends to run"
    )
    args = parser.parse_args()
    server = ForkServer()
    rows = []
    cluster = None
    pg = os.environ.get("TOOLFOLD_TEST_POSTGRES_DSN")
    if pg is None:
        from pg_fixture import start_cluster

        cluster = start_cluster(fsync=True)
        pg = cluster.dsn
    try:
        for backend in args.backends.split(","):
            with tempfile.TemporaryDirectory(prefix=f"crashkill-{backend}-") as tmp:
                outcomes, seconds = await run_points(
                    backend, Path(tmp), args.points, server=server, pg_server=pg
                )
            bad = [o for o in outcomes if o.violations]
            rows.append(
                (
                    backend,
                    "bundled (toolfold)",
                    len(outcomes),
                    sum(o.killed for o in outcomes),
                    sum(o.killed and o.torn for o in outcomes),
                    sum(o.partial_message for o in outcomes),
                    sum(o.killed and o.in_short_call for o in outcomes),
                    len(bad),
                    seconds,
                )
            )
            for o in bad[:5]:
                print(f"  {backend} kill at #{o.kill_at} torn={o.torn}: {o.violations}")
        broken_points = max(40, args.points // 10)
        symptoms: dict[str, collections.Counter[str]] = {}
        rejected = ("memo_then_checkpoint", "checkpoint_then_memo")
        for broken in rejected if "sqlite" in args.backends.split(",") else ():
            with tempfile.TemporaryDirectory(prefix="crashkill-broken-") as tmp:
                outcomes, seconds = await run_points(
                    "sqlite", Path(tmp), broken_points, server=server, broken=broken
                )
            bad = [o for o in outcomes if o.violations]
            symptoms[broken] = collections.Counter(
                v.split(" after")[0] for o in bad for v in o.violations if "c-steps: output" in v
            )
            rows.append(
                (
                    "sqlite",
                    f"{broken} (rejected design)",
                    len(outcomes),
                    sum(o.killed for o in outcomes),
                    0,
                    sum(o.partial_message for o in outcomes),
                    sum(o.killed and o.in_short_call for o in outcomes),
                    len(bad),
                    seconds,
                )
            )
    finally:
        server.close()
        if cluster is not None:
            cluster.stop()
    print("### Crash-kill\n")
    print(
        f"Command: `.venv/bin/python benchmarks/bench_crashkill.py --points {args.points} "
        f"--backends {args.backends}`\n"
    )
    print(
        "| backend | memo design | kill points | killed mid-run | torn record "
        "| partial answer kept | killed in a short call | runs violating an invariant | time |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for backend, design, n, killed, torn, partial, short, bad, seconds in rows:
        print(
            f"| {backend} | {design} | {n} | {killed} | {torn} | {partial} | {short} | {bad} "
            f"| {seconds:.0f} s |"
        )
    print()
    for broken, counter in symptoms.items():
        print(f"- {broken}: " + ", ".join(f"{k} ×{v}" for k, v in counter.items()))


if __name__ == "__main__":
    asyncio.run(main())
