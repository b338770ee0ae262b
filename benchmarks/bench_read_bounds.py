"""Peak memory of the ``read`` tool on hostile files, before and after the chunked reader,
side by side with coreutils doing the same job.

Cases (each in a fresh child process, so peaks do not mix):

- **/dev/zero**: a device that never ends and has no newline;
- **one line, 1.5 GB**: a sparse file (a 60 KB text head, then NUL bytes, no
  newline), so no disk is used and reads come from zero pages;
- **empty file**: the fixed cost of a child that imports toolfold and runs one call.

For each, ``read`` runs through the real harness (``execute_tool_call`` with a
``LocalExecEnv``) in a child whose address space is capped (``RLIMIT_AS``, default
2 GiB): a reader that holds the file is killed there ("killed at cap") instead of
taking the machine down. The child reports its peak RSS (``VmHWM``) and the answer's
first line; wall time is the parent's. The baselines are what a user would reach for
in a shell: ``head -c 51200`` (the window alone) and ``wc -lc`` (counting the whole
file, as ``read``'s totals do).

``--before REV`` also runs the code of git revision ``REV`` (``git archive`` of its
``src/`` into the temporary directory), e.g. the commit before the chunked reader.

Not measured: remote reads (the exec host runs the same file operation), ``grep``
(same reader; its line segments are 256 KiB), a disk-bound file (the big file is
sparse), and time on an idle machine (the figures come from a shared 2-core box).

Run: ``.venv/bin/python benchmarks/bench_read_bounds.py --before 2918fa7~1``
(about a minute; the sparse file is created under ``$TMPDIR`` and deleted
afterwards). The baselines' peak RSS comes from GNU ``time``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MiB = 1024 * 1024
BIG = 1_500_000_000

CHILD = r"""
import asyncio, json, sys
from pathlib import Path
from toolfold.execenv import LocalExecEnv
from toolfold.harness import EventBus, ToolContext, execute_tool_call
from toolfold.tools import READ

async def main():
    cwd = Path(sys.argv[1])
    context = ToolContext(env=LocalExecEnv(cwd / "spill"), cwd=cwd)
    r = await execute_tool_call(READ, "c", {"path": sys.argv[2]}, run_id="r", turn_id="t",
                                bus=EventBus(), context=context)
    tail = r.text.rsplit("\n", 1)[-1]
    return {"error": r.is_error, "chars": len(r.text), "footer": tail[:200]}

out = asyncio.run(main())
status = Path("/proc/self/status").read_text()
out["hwm_kib"] = int(status.split("VmHWM:")[1].split()[0])
print(json.dumps(out))
"""


def run_child(src: Path, work: Path, target: str, cap: int) -> dict[str, Any]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(work), target],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env=env,
        timeout=600,
        check=False,
    )
    seconds = time.perf_counter() - started
    if child.returncode != 0:
        last = (child.stderr.strip().splitlines() or ["?"])[-1]
        return {"killed": True, "why": last[:120], "seconds": seconds}
    return {**json.loads(child.stdout), "killed": False, "seconds": seconds}


def run_tool(argv: list[str]) -> dict[str, Any]:
    """``argv``'s wall time and peak RSS, from GNU time (``ru_maxrss`` of a child
    forked from this process would count this process's pages too)."""
    gnu_time = shutil.which("time") or "/usr/bin/time"
    started = time.perf_counter()
    child = subprocess.run(
        [gnu_time, "-f", "%M", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - started
    return {"seconds": seconds, "hwm_kib": int(child.stderr.strip().splitlines()[-1])}


def show(name: str, got: dict[str, Any]) -> str:
    if got.get("killed"):
        return f"| {name} | killed at cap ({got['why']}) | {got['seconds']:.1f} |"
    mem = f"{got['hwm_kib'] / 1024:.0f}"
    note = got.get("footer", "")
    if note.startswith("MemoryError"):
        mem = f"{mem}, then MemoryError"
        note = "the next allocation failed at the cap (the harness made it the call's error)"
    return f"| {name} | {mem} | {got['seconds']:.1f} | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", help="git revision whose src/ to run as 'before'")
    parser.add_argument("--cap-mib", type=int, default=2048, help="address-space cap of a child")
    args = parser.parse_args()
    repo = Path(__file__).resolve().parent.parent
    work = Path(tempfile.mkdtemp(prefix="bench-read-bounds-"))  # the big file is sparse
    cap = args.cap_mib * MiB
    try:
        big = work / "one-line.txt"
        with big.open("wb") as f:
            f.write("é€x".encode() * 10_000)
            f.truncate(BIG)
        (work / "empty.txt").write_bytes(b"")
        sources = {"after": repo / "src"}
        if args.before:
            old = work / "before"
            old.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(repo), "archive", args.before, "src"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            sources = {f"before ({args.before})": old / "src", **sources}
        print(f"address-space cap per child: {args.cap_mib} MiB; big file: {BIG:,} bytes\n")
        print("| case | peak RSS (MiB) | wall (s) | answer's last line |")
        print("| --- | --- | --- | --- |")
        for label, src in sources.items():
            for target in ("empty.txt", "/dev/zero", str(big)):
                name = f"{label}: read {Path(target).name}"
                print(show(name, run_child(src, work, target, cap)), flush=True)
        print(show("head -c 51200 one-line.txt", run_tool(["head", "-c", "51200", str(big)])))
        print(show("wc -lc one-line.txt", run_tool(["wc", "-lc", str(big)])))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
