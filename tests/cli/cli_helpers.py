"""Helpers for the CLI tests: run ``toolfold`` as a real subprocess, poll a store."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx

from toolfold.chord import Decoder, apply, is_base

TOOLFOLD = [sys.executable, "-m", "toolfold.cli"]

TOKEN = secrets.token_urlsafe(32)
"""The token ``serve()`` starts ``toolfold serve`` with (one per test run)."""

AUTH = {"Authorization": f"Bearer {TOKEN}"}
"""Headers that authenticate a request to a server started by ``serve()``."""

T = TypeVar("T")


def clean_env() -> dict[str, str]:
    """The environment without a ``TOOLFOLD_STORE`` or ``TOOLFOLD_TOKEN`` the developer
    may have set."""
    env = {k: v for k, v in os.environ.items() if k not in ("TOOLFOLD_STORE", "TOOLFOLD_TOKEN")}
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    return env


def toolfold(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``toolfold ARGS`` to completion (stdout and stderr captured, text)."""
    return subprocess.run(
        [*TOOLFOLD, *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (for ``toolfold serve --port``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def start(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start ``toolfold ARGS`` in its own process group (so a test can kill all of it)."""
    return subprocess.Popen(
        [*TOOLFOLD, *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_for(
    probe: Callable[[], T | None], what: str, *, timeout: float = 60, proc: Any = None
) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds
    (or as soon as ``proc`` exits). Polling a condition with a deadline, not a sleep
    standing in for synchronisation."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            _out, err = proc.communicate()
            raise AssertionError(f"process exited {proc.returncode} before {what}: {err!r:.2000}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def serve(store_url: str, cwd: Path, *args: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``toolfold serve --token TOKEN ARGS`` on a free port over ``store_url`` and
    wait until it answers (to ``AUTH``); return the process and its base URL. A server
    that never answers is killed."""
    port = free_port()
    proc = start(
        "serve", "--port", str(port), "--store", store_url, "--token", TOKEN, *args, cwd=cwd
    )
    base = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        try:
            return httpx.get(f"{base}/v1/sessions", headers=AUTH, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(answering, "the server to answer", proc=proc)
    except BaseException:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return proc, base


class LineReader:
    """Reads a child's pipe on a thread so a test can wait for a line without blocking."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._pump, args=(pipe,), daemon=True)
        self._thread.start()

    def _pump(self, pipe: IO[bytes] | None) -> None:
        if pipe is None:
            return
        for raw in pipe:
            with self._lock:
                self._lines.append(raw.decode(errors="replace"))

    def has(self, fragment: str) -> bool:
        """Whether a line read so far contains ``fragment``."""
        with self._lock:
            return any(fragment in line for line in self._lines)

    def lines(self) -> list[str]:
        """The lines read so far (the child may still be writing)."""
        with self._lock:
            return list(self._lines)

    def text(self) -> str:
        """Everything read so far (after the child exited: everything)."""
        self._thread.join(timeout=10)
        with self._lock:
            return "".join(self._lines)


def spill_text(spill_root: Path) -> str:
    """Everything spilled under ``spill_root`` so far (empty if no spill file yet)."""
    if not spill_root.is_dir():
        return ""
    return "".join(
        p.read_text(errors="replace") for p in sorted(spill_root.rglob("*.log")) if p.is_file()
    )


def pending_text(url: str, session_name: str) -> str | None:
    """The recovered pending output of the session's first unsettled call, read through
    the library (another process may be writing the store), or ``None``."""
    from toolfold.cli._calls import list_calls, pending_output
    from toolfold.storage import StorageError, open_repository

    async def read() -> str | None:
        repo = open_repository(url)
        try:
            session = await repo.open_session(session_name)
            calls = [c for c in await list_calls(session) if not c.settled]
            if not calls:
                return None
            state = await pending_output(session, calls[0])
            if not isinstance(state, dict):
                return None
            return str(state["content"][0]["text"])
        except StorageError:
            return None
        finally:
            await repo.close()

    return asyncio.run(read())


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single ``toolfold: error: ...`` line of a failed run (and nothing else)."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("toolfold: error: "), lines[0]
    return lines[0]


def sse_values(lines: Iterator[str]) -> Iterator[Any]:
    """Fold an SSE lane stream the way the viewer does; yields the value after each batch.
    The first batch of a subscription must be a base (a replace of the whole view) and
    event ids must run 0, 1, 2, ... without a gap."""
    decoder, value, expected, event_id = Decoder(), None, 0, None
    for line in lines:
        if line.startswith("id: "):
            event_id = int(line[4:])
        elif line.startswith("data: "):
            assert event_id == expected, f"gap: expected id {expected}, got {event_id}"
            wire = json.loads(line[6:])
            assert expected > 0 or is_base(wire)
            value = apply(value, decoder.decode(wire))
            expected += 1
            yield value


def until(replica: Iterator[Any], what: str, ok: Callable[[Any], bool]) -> Any:
    """The first value of ``replica`` (``sse_values``) that is ``ok`` (at most 10,000 read)."""
    for _, value in zip(range(10_000), replica, strict=False):
        if ok(value):
            return value
    raise AssertionError(f"the lane stream ended or ran long without {what}")


def lane_call(value: Any) -> Any:
    """The first call of a lane view (``None`` before there is one)."""
    tools = (value or {}).get("tools") or {}
    return next(iter(tools.values()), None)


def lane_text(value: Any) -> str:
    """The output text of the lane view's first call so far."""
    call = lane_call(value)
    if not call or not call["output"]:
        return ""
    text: str = call["output"]["content"][0]["text"]
    return text
