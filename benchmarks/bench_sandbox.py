"""What confinement costs a command: start-up time per command and output throughput,
``LocalExecEnv`` with a bubblewrap ``Sandbox`` against the same env unconfined (the
alternative a user picks when they switch it off), run side by side and interleaved.

- **start-up**: ``exec("true")`` repeated; the median (and p90) wall time per call,
  unconfined, ``read-only`` and ``workspace-write`` (the cwd a directory outside /tmp,
  a planted ``~/.ssh`` so a secret is hidden as in real use). The difference of medians
  is what a sandbox adds per command. Also bwrap alone (``subprocess.run`` of the same
  argv) against ``bash -c true``, to separate bwrap's cost from toolfold's.
- **throughput**: ``yes | head -c 500M`` through ``exec`` (default window, spill on),
  inside against outside, alternating; MB/s of the best and the median run, and the
  ratio of medians.

Not measured: commands that do real work (the sandbox costs nothing per syscall once
started, except path lookups crossing its extra mounts), a machine with many
concurrent sandboxes, an idle machine (the figures come from a shared 2-core box).

Run: ``.venv/bin/python benchmarks/bench_sandbox.py`` (about a minute; ``--starts N``
and ``--runs N`` change the repetitions, ``--mb`` the output size).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from toolfold.execenv import LocalExecEnv, Sandbox


async def per_call(env: LocalExecEnv, cwd: Path, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        result = await env.exec("true", cwd=cwd)
        times.append(time.perf_counter() - t)
        assert result.exit_code == 0, result.text
    return times


async def throughput(env: LocalExecEnv, cwd: Path, mb: int) -> float:
    t = time.perf_counter()
    result = await env.exec(f"yes | head -c {mb}M", cwd=cwd)
    elapsed = time.perf_counter() - t
    assert result.exit_code == 0 and result.truncation.total_bytes == mb * 1024 * 1024
    return mb * 1024 * 1024 / elapsed / 1e6


def ms(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=10)
    return f"median {statistics.median(xs) * 1000:6.1f} ms   p90 {q[-1] * 1000:6.1f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mb", type=int, default=500)
    args = parser.parse_args()
    base = Path.home() / ".cache" / "toolfold-bench"
    base.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="sandbox-", dir=base))
    home = root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("not a key\n")
    os.environ["HOME"] = str(home)
    ws = root / "ws"
    ws.mkdir()
    try:
        envs = {
            "unconfined": LocalExecEnv(root / "spill-plain"),
            "read-only": LocalExecEnv(root / "spill-ro", sandbox=Sandbox("read-only")),
            "workspace-write": LocalExecEnv(root / "spill-ww", sandbox=Sandbox("workspace-write")),
        }
        for env in envs.values():  # warm caches (bwrap --help probe, page cache)
            await per_call(env, ws, 3)
        starts: dict[str, list[float]] = {k: [] for k in envs}
        for _ in range(args.starts // 5):  # interleaved in blocks of 5
            for name, env in envs.items():
                starts[name] += await per_call(env, ws, 5)
        print(f"start-up per exec('true'), {len(starts['unconfined'])} calls each:")
        plain = statistics.median(starts["unconfined"])
        for name, xs in starts.items():
            extra = statistics.median(xs) - plain
            print(f"  {name:16s} {ms(xs)}   added {extra * 1000:+6.1f} ms")
        argv = Sandbox("workspace-write").argv(["bash", "-c", "true"], cwd=str(ws))
        raw: dict[str, list[float]] = {"bash -c true": [], "bwrap ... bash -c true": []}
        bash = shutil.which("bash") or "/bin/sh"
        for _ in range(args.starts):
            for name, cmd in (
                ("bash -c true", [bash, "-c", "true"]),
                ("bwrap ... bash -c true", argv),
            ):
                t = time.perf_counter()
                subprocess.run(cmd, check=True, cwd=ws)
                raw[name].append(time.perf_counter() - t)
        print("the same, subprocess.run alone:")
        for name, xs in raw.items():
            print(f"  {name:24s} {ms(xs)}")
        speeds: dict[str, list[float]] = {"unconfined": [], "workspace-write": []}
        for _ in range(args.runs):
            for name in speeds:
                speeds[name].append(await throughput(envs[name], ws, args.mb))
        print(f"yes | head -c {args.mb}M through exec, {args.runs} runs each:")
        for name, xs in speeds.items():
            print(
                f"  {name:16s} best {max(xs):7.0f} MB/s   median {statistics.median(xs):7.0f} MB/s"
            )
        ratio = statistics.median(speeds["workspace-write"]) / statistics.median(
            speeds["unconfined"]
        )
        print(f"  inside / outside (medians): {ratio:.2f}x")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
