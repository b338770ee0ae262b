"""Live stored sessions: how soon a line printed by ``toolfold run`` reaches a lane subscriber.

Run: .venv/bin/python benchmarks/bench_follow.py [--lines 20] [--every 0.3]

Two real processes on one SQLite store: ``toolfold serve`` and ``toolfold run
--session live`` whose command prints its wall-clock time every ``--every`` seconds.
One SSE subscriber of lane ``live`` folds the stream and notes when each line first
appears; the latency is that moment minus the time printed in the line. It is the
sum of the run's checkpoint pacing (at most 1 s), the server's poll (0.25 s) and the
delivery. The alternative a user had before was a page reload (no live view at
all), so there is no side-by-side figure: this measures the bound the docs state.

Not measured: PostgreSQL (same polling), many sessions followed at once, CPU of an
idle poll.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from toolfold.chord import Decoder, apply  # noqa: E402

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLFOLD_STORE", "TOOLFOLD_TOKEN")}
    env["PYTHONPATH"] = str(ROOT / "src")
    return subprocess.Popen(
        [*TOOLFOLD, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait(probe: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--every", type=float, default=0.3)
    args = parser.parse_args()
    token = secrets.token_urlsafe(24)
    auth = {"Authorization": f"Bearer {token}"}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        url = f"sqlite:{cwd / 'toolfold.db'}"
        port = _free_port()
        base = f"http://127.0.0.1:{port}"
        procs = [_start(["serve", "--port", str(port), "--store", url, "--token", token], cwd)]
        try:

            def answering() -> bool:
                try:
                    return httpx.get(f"{base}/v1/sessions", headers=auth, timeout=2).is_success
                except httpx.TransportError:
                    return False

            _wait(answering, "the server")
            command = (
                f"for i in $(seq 1 {args.lines}); do echo line-$i $(date +%s.%N); "
                f"sleep {args.every}; done"
            )
            procs.append(_start(["run", "--store", url, "--session", "live", "--", command], cwd))

            def listed() -> bool:
                body = httpx.get(f"{base}/v1/sessions", headers=auth, timeout=2).json()
                return "live" in body["sessions"]

            _wait(listed, "the session")
            latencies: dict[str, float] = {}
            decoder, value = Decoder(), None
            with (
                httpx.Client(base_url=base, headers=auth) as client,
                client.stream("GET", "/v1/lanes/live/state", timeout=30) as response,
            ):
                for line in response.iter_lines():
                    if not line.startswith("data: "):
                        continue
                    value = apply(value, decoder.decode(json.loads(line[6:])))
                    now = time.time()
                    for call in (value or {}).get("tools", {}).values():
                        text = (call.get("output") or {}).get("content", [{}])[0].get("text", "")
                        for row in text.splitlines():
                            name, _, stamp = row.partition(" ")
                            if name.startswith("line-") and name not in latencies and stamp:
                                latencies[name] = now - float(stamp)
                    if len(latencies) >= args.lines:
                        break
        finally:
            for proc in procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
    values = sorted(latencies.values())
    print("## Live stored session: print in `toolfold run` → seen by a lane subscriber\n")
    print("| lines | every | median | p90 | max |")
    print("|---:|---:|---:|---:|---:|")
    p90 = values[int(0.9 * (len(values) - 1))]
    print(
        f"| {len(values)} | {args.every:g} s | {statistics.median(values):.2f} s | "
        f"{p90:.2f} s | {values[-1]:.2f} s |"
    )


if __name__ == "__main__":
    main()
