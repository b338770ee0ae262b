"""What any Python-side capture of a fast producer costs: the floors under toolfold's capture.

Run: .venv/bin/python benchmarks/bench_capture_floor.py [--size 300M] [--rounds 3]
     [--before-src OLD/src ...]   (adds toolfold's capture from other checkouts, same rounds)

Every round runs, back to back, ``yes | head -c SIZE`` redirected to /dev/null (raw,
right before each row: the same load) and then each row below:

- ``> file``: the command redirected to a file in the directory the Python children
  spill to (the system temp dir): the floor of ANY design that keeps a spill file,
  since the bytes must reach the page cache and nothing can be cheaper than the
  producer writing them there itself;
- ``| wc -l``: the cheapest reader that counts lines (C, vectorised), no spill;
- each design in its own Python child process, which reads the command's stdout
  through a 1 MiB pipe in 1 MiB reads:

  - ``read``: only ``os.read`` (the ceiling of any Python reader);
  - ``read + count``: plus ``bytes.count(b"\\n")`` per read (exact ``total_lines``,
    which the capture reports);
  - ``+ spill, writer thread``: plus every read queued to a thread that ``os.write``s
    it to a file (the shape of toolfold's writer-thread ``SpillFile``);
  - ``+ spill, tee/splice``: Linux only. ``tee(2)`` duplicates the pipe's pages into a
    second pipe (no copy), a thread ``os.splice``s that pipe into the file (the kernel
    copies; Python never holds the spilled bytes), and Python reads the first pipe;
  - ``toolfold capture``: ``LocalExecEnv.exec`` with the default capture, spill on/off.

Reported per row (medians over rounds): throughput, ratio raw time / time and ratio
``> file`` time / time (both per round: the second is how close a design is to the
floor of any spilling design), CPU seconds of the reading process (user + system, all
its threads; for the shell rows, ``wc`` or none) and of everything else (``yes`` +
``head``). On a shared 2-core machine the wall ratios move with the load; the CPU
columns say what each design itself costs.

Not measured: output with control bytes or long lines (``bench_execenv.py``'s ``fold``
pipeline), the disk itself (every file is written to the page cache and deleted, never
synced), the start-up of the capture (imports and the first spawn happen before the
measured region), and publishing to a consumer (the capture runs without one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import asyncio, ctypes, fcntl, json, os, queue, resource, shutil, subprocess, sys, tempfile, threading, time
from pathlib import Path

mode, cmd = sys.argv[1], sys.argv[2]
spill_dir = tempfile.mkdtemp()
spill = os.path.join(spill_dir, "spill")
lines = total = 0

def pipe():
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    return r, w

def run_reader():
    global lines, total
    r, w = pipe()
    child = subprocess.Popen(["bash", "-c", cmd], stdout=w)
    os.close(w)
    out = os.open(spill, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    if mode == "read":
        while data := os.read(r, 1 << 20):
            total += len(data)
    elif mode == "count":
        while data := os.read(r, 1 << 20):
            total += len(data)
            lines += data.count(b"\n")
    elif mode == "thread":
        q = queue.SimpleQueue()
        def writer():
            while (item := q.get()) is not None:
                os.write(out, item)
        th = threading.Thread(target=writer)
        th.start()
        while data := os.read(r, 1 << 20):
            total += len(data)
            lines += data.count(b"\n")
            q.put(data)
        q.put(None)
        th.join()
    elif mode == "tee":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.tee.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]
        libc.tee.restype = ctypes.c_ssize_t
        br, bw = pipe()
        def splicer():
            while os.splice(br, out, 1 << 20):
                pass
        th = threading.Thread(target=splicer)
        th.start()
        while True:
            n = libc.tee(r, bw, 1 << 20, 0)  # blocks until the producer wrote something
            if n == 0:
                break
            if n < 0:
                raise OSError(ctypes.get_errno(), "tee")
            data = os.read(r, n)
            total += len(data)
            lines += data.count(b"\n")
        os.close(bw)
        th.join()
    os.close(out)
    child.wait()

async def run_capture(spill_on):
    global lines, total
    from toolfold.execenv import CaptureOptions, LocalExecEnv

    env = LocalExecEnv(Path(spill_dir) / "s")
    await env.exec("true")  # start-up costs (imports, first spawn) are not the capture's
    start()
    res = await env.exec(cmd, capture=CaptureOptions(spill=spill_on))
    stop()
    total, lines = res.truncation.total_bytes, res.truncation.total_lines
    if res.spill_path:
        assert os.path.getsize(res.spill_path) == total

def cpu(who):
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime

base = {}
def start():
    base.update(t=time.perf_counter(), me=cpu(resource.RUSAGE_SELF),
                kids=cpu(resource.RUSAGE_CHILDREN))

def stop():
    base.update(seconds=time.perf_counter() - base["t"], cpu=cpu(resource.RUSAGE_SELF) - base["me"],
                producer_cpu=cpu(resource.RUSAGE_CHILDREN) - base["kids"])

try:
    if mode.startswith("capture"):
        sys.path.insert(0, sys.argv[3])
        asyncio.run(run_capture(mode == "capture-spill"))
    else:
        start()
        run_reader()
        stop()
finally:
    shutil.rmtree(spill_dir)  # outside the measured region, for every design alike
print(json.dumps({
    "seconds": base["seconds"], "bytes": total, "lines": lines,
    "cpu": base["cpu"], "producer_cpu": base["producer_cpu"],
}))
"""

SHELL_ROWS = {
    # row -> (label, the command's suffix; {spill} is a file in the spill directory)
    "file": ("`> file` (producer writes the spill file itself)", "> {spill}"),
    "wc": ("`\\| wc -l` (C reader counting lines)", "| wc -l > /dev/null"),
}

DESIGNS = [
    ("file", ""),
    ("wc", ""),
    ("read", "read"),
    ("count", "read + count"),
    ("thread", "read + count + spill, writer thread"),
    ("tee", "read + count + spill, tee/splice"),
    ("capture-spill", "toolfold capture, spill on"),
    ("capture", "toolfold capture, spill off"),
]


def raw_seconds(command: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(["bash", "-c", f"{command} > /dev/null"], check=True)
    return time.perf_counter() - t0


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def shell_row(mode: str, command: str) -> dict[str, float]:
    """A floor row: the command with a shell redirection or pipe, timed from here."""
    spill_dir = tempfile.mkdtemp()  # where the Python children spill too
    spill = os.path.join(spill_dir, "spill")
    try:
        script = f"{command} {SHELL_ROWS[mode][1].format(spill=spill)}"
        cpu0, t0 = children_cpu(), time.perf_counter()
        subprocess.run(["bash", "-c", script], check=True)
        seconds, total_cpu = time.perf_counter() - t0, children_cpu() - cpu0
        size = os.path.getsize(spill) if mode == "file" else None
    finally:
        shutil.rmtree(spill_dir)
    # Only the whole pipeline's CPU is known here (bash cannot time one stage cheaply).
    return {
        "seconds": seconds,
        "bytes": float(size or 0),
        "cpu": float("nan"),
        "producer_cpu": total_cpu,
    }


def child(mode: str, command: str, src: Path) -> dict[str, float]:
    if mode in SHELL_ROWS:
        return shell_row(mode, command)
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode.split("@")[0], command, str(src)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, float] = json.loads(out)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", default="300M")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    parser.add_argument(
        "--before-src",
        type=Path,
        action="append",
        default=[],
        help="another checkout's src/ (repeatable): its capture, spill on and off, runs in "
        "the same rounds, labelled with the checkout's directory name",
    )
    parser.add_argument("--only", help="comma-separated rows to run (file,wc,read,count,...)")
    args = parser.parse_args()
    command = f"yes | head -c {args.size}"
    designs = [d for d in DESIGNS if d[0] != "tee" or sys.platform == "linux"]
    srcs = {}
    for src in args.before_src:
        name = src.resolve().parent.name
        srcs[name] = src
        designs += [
            (f"capture-spill@{name}", f"toolfold capture, spill on ({name})"),
            (f"capture@{name}", f"toolfold capture, spill off ({name})"),
        ]
    if args.only:
        wanted = set(args.only.split(","))
        designs = [d for d in designs if d[0].split("@")[0] in wanted or d[0] == "file"]
    labels = {mode: label or SHELL_ROWS[mode][0] for mode, label in designs}
    runs: dict[str, list[tuple[float, dict[str, float]]]] = {mode: [] for mode, _ in designs}
    for _ in range(args.rounds):
        for mode, _label in designs:  # raw right before each row: the same load
            src = srcs[mode.split("@")[1]] if "@" in mode else args.src
            raw = raw_seconds(command)
            runs[mode].append((raw, child(mode, command, src)))
    mb = _mebibytes(args.size)  # head -c counts K/M/G in powers of 1024
    load = os.getloadavg()
    print(
        f"## `{command}`: medians of {args.rounds} rounds "
        f"(load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})\n"
    )
    print("| row | MB/s | ratio to raw | ratio to `> file` | reader CPU s | other CPU s |")
    print("|---|---:|---:|---:|---:|---:|")
    floor = [r["seconds"] for _, r in runs["file"]]
    for mode, _label in designs:
        results = runs[mode]
        rate = statistics.median(mb / r["seconds"] for _, r in results)
        ratio = statistics.median(raw / r["seconds"] for raw, r in results)
        to_file = statistics.median(
            f / r["seconds"] for f, (_, r) in zip(floor, results, strict=True)
        )
        cpus = [r["cpu"] for _, r in results]
        cpu = "n/a" if any(c != c for c in cpus) else f"{statistics.median(cpus):.2f}"
        producer = statistics.median(r["producer_cpu"] for _, r in results)
        print(
            f"| {labels[mode]} | {rate:.0f} | {ratio:.2f} | {to_file:.2f} | {cpu} | {producer:.2f} |"
        )
    raws = [raw for results in runs.values() for raw, _ in results]
    print(
        f"\nraw: median {mb / statistics.median(raws):.0f} MB/s "
        f"({statistics.median(raws):.3f} s); per round, reader CPU s of each row:"
    )
    for mode, _label in designs:
        cpus = [r["cpu"] for _, r in runs[mode]]
        secs = [r["seconds"] for _, r in runs[mode]]
        print(
            f"- {mode}: seconds {' '.join(f'{x:.3f}' for x in secs)}; "
            f"reader CPU {' '.join(f'{x:.2f}' for x in cpus)}"
        )


def _mebibytes(size: str) -> float:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(size[:-1]) * units[size[-1]] / 2**20 if size[-1] in units else int(size) / 2**20


if __name__ == "__main__":
    main()
