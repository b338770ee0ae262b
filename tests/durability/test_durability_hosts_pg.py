"""Many hosts on one PostgreSQL, as separate processes (host_child.py): a host stopped
past its lease is taken over and then fenced, and a host killed mid-call has its call
settled by another host's janitor — exactly once. Waits are bounded polls on what the
store or a child reports; how long a takeover took is measured in
benchmarks/bench_pg_hosts.py, not asserted here."""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from toolfold.durability import Durability, lease_holder, lease_token
from toolfold.harness import DurableHooks, Harness, resume
from toolfold.storage import Session, open_repository

CHILD = Path(__file__).with_name("host_child.py")
SESSION = "hosts"
TTL = 1.0
POLLS = 600  # x 0.05 s: far above any lease here, even on a loaded machine


class Host:
    """A host process whose stdout lines can be awaited with a bound."""

    def __init__(self, url: str, host: str, call: str, *, janitor: float | None = None) -> None:
        args = [sys.executable, str(CHILD), url, SESSION, host, call, str(TTL)]
        if janitor is not None:
            args += ["--janitor", str(janitor)]
        self.name = host
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put("<EOF>")

    def expect(self, prefix: str, timeout: float = 60.0) -> str:
        """The next line starting with ``prefix`` (other lines are skipped)."""
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(
                    f"host {self.name} said no {prefix!r} in {timeout} s"
                ) from None
            if line == "<EOF>":
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"host {self.name} exited before {prefix!r}: {err[-2000:]}")
            if line.startswith(prefix):
                return line

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.fixture
def hosts() -> Iterator[list[Host]]:
    started: list[Host] = []
    try:
        yield started
    finally:
        for h in started:
            h.kill()


async def entries_of(session: Session, call: str) -> list[Any]:
    return [e.value for e in await session.entries_by_key(call)]


async def test_a_stopped_host_is_taken_over_and_its_late_writes_are_fenced(
    postgres_url: str, hosts: list[Host]
) -> None:
    a = Host(postgres_url, "A", "c1")
    hosts.append(a)
    a.expect("READY")
    os.kill(a.proc.pid, signal.SIGSTOP)  # A is paused: its heartbeat stops too
    async with open_repository(postgres_url) as repo:
        session = await repo.open_session(SESSION)
        h = Harness([], hooks=DurableHooks(Durability(session, host="B", lease_ttl=TTL)))
        results: list[Any] = []
        for _ in range(POLLS):  # resume skips the call until A's lease expired
            results = await resume(h)
            if results:
                break
            await asyncio.sleep(0.05)
        [result] = results
        assert result.tool_call_id == "c1" and result.outcome == "interrupted"
        os.kill(a.proc.pid, signal.SIGCONT)
        a.send("write after")
        fenced = a.expect("FENCED")
        assert "by host 'A' refused: it carries fencing token 1, but the stored token is" in fenced
        a.send("finish")
        assert a.expect("RUN-ERROR").startswith("RUN-ERROR FencedError")
        [settled] = await entries_of(session, "c1")  # once: B's settlement, not A's
        assert "before" in str(settled["content"]) and "after" not in str(settled["content"])
        assert await session.live_scopes() == []
        assert await session.get_value(lease_holder("run-c1")) is None
        assert await session.get_value(lease_token("run-c1")) == {"settled": 2}


async def test_kill_9_one_of_three_hosts_another_settles_its_call_once(
    postgres_url: str, hosts: list[Host]
) -> None:
    names = ["A", "B", "C"]
    for n in names:
        hosts.append(Host(postgres_url, n, f"call-{n}", janitor=0.1))
    for h in hosts:
        h.expect("READY")
    victim = hosts[0]
    victim.send("write last words")
    victim.expect("OK")
    victim.proc.kill()  # kill -9 in the middle of the call
    victim.proc.wait(timeout=30)
    async with open_repository(postgres_url) as repo:
        session = await repo.open_session(SESSION)
        found: list[Any] = []
        for _ in range(POLLS):
            found = await entries_of(session, "call-A")
            if found:
                break
            await asyncio.sleep(0.05)
        [settled] = found
        assert "last words" in str(settled["content"]) and settled["is_error"]
        # The survivors finish their own calls; each call is settled exactly once.
        for h in hosts[1:]:
            h.send("finish")
            h.expect("SETTLED")
        for n in names:
            assert len(await entries_of(session, f"call-{n}")) == 1
        rescuers = []
        for h in hosts[1:]:
            h.send("stop")
            h.proc.wait(timeout=30)
            out = [h.lines.get_nowait() for _ in range(h.lines.qsize())]
            rescuers += [h.name for line in out if line == "RESUMED call-A"]
        assert len(rescuers) <= 1  # at most one reported it: only one took it over
        assert await session.live_scopes() == []
