"""Crash-kill at scale for ``toolfold run``'s direct driver (no asyncio): kill points
across its storage calls, with the count and the invariant violations found (target: 0).

Run: ``.venv/bin/python benchmarks/bench_crashkill_direct.py [--points N]`` (default
1,000). Each point forks the driver on a SQLite store, SIGKILLs it at storage call #k,
resumes the session as ``toolfold resume`` does and checks what
``tests/durability/crashkill_direct.py`` checks (a resumed call holds the last
checkpoint committed before the kill + the marker). Points alternate a short call (ends
inside its first checkpoint interval: start and settlement only) and a long one (paced
checkpoints every 20 ms, a lease renewal every 50 ms); k cycles over 1 .. the calls a
run of that command makes + 1 (a kill point past the last call is a run that settled).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "durability"))

from crashkill_direct import LONG, SHORT, kill_point  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=1000)
    args = parser.parse_args()
    started = time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="crashkill-direct-") as tmp:
        for name, command in (("short", SHORT), ("long", LONG)):
            calls = kill_point(Path(tmp) / f"ref-{name}", 0, command).calls
            n = args.points // 2
            outcomes = [
                kill_point(Path(tmp) / f"{name}-{i}", 1 + i % (calls + 1), command)
                for i in range(n)
            ]
            bad = [o for o in outcomes if o.violations]
            for o in bad[:5]:
                print(f"  {name}: {o.violations}")
            rows.append(
                (
                    name,
                    calls,
                    n,
                    sum(o.killed for o in outcomes),
                    sum(o.resumed for o in outcomes),
                    len(bad),
                )
            )
    print("### Crash-kill of the direct run\n")
    print(
        f"Command: `.venv/bin/python benchmarks/bench_crashkill_direct.py --points {args.points}`\n"
    )
    print(
        "| call | storage calls per run | kill points | killed | settled by resume | violating an invariant |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, calls, n, killed, resumed, bad in rows:
        print(f"| {name} | {calls} | {n} | {killed} | {resumed} | {bad} |")
    from toolfold import _json

    print(
        f"\nJSON codec of the killed runs: {_json.codec_name()}; {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
