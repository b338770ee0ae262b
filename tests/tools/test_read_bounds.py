"""``read`` and ``grep`` hold the window plus a fixed buffer whatever the file is.

Each test performs an attack: ``/dev/zero``, a FIFO nobody writes to, a socket, a
huge line with no newline, a file that grows faster than it is read. Memory is
measured (tracemalloc's peak in this process, or an address-space cap on a child
that would otherwise be killed), never time.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import toolfold.execenv._fileops as fileops
from toolfold.execenv import LocalExecEnv
from toolfold.harness import EventBus, ToolContext, ToolResult, execute_tool_call
from toolfold.tools import GREP, READ

MiB = 1024 * 1024


async def call(tool: Any, args: dict[str, Any], cwd: Path) -> ToolResult:
    context = ToolContext(env=LocalExecEnv(cwd / "spill"), cwd=cwd)
    return await execute_tool_call(
        tool, "c1", args, run_id="r", turn_id="t", bus=EventBus(), context=context
    )


def sparse(path: Path, size: int, head: bytes = b"", tail: bytes = b"") -> Path:
    """A file of ``size`` bytes, all NUL between ``head`` and ``tail``, taking no disk."""
    with path.open("wb") as f:
        f.write(head)
        f.truncate(size - len(tail))
        f.seek(size - len(tail))
        f.write(tail)
    return path


def peak_of(coro: Any) -> tuple[Any, int]:
    """Run ``coro`` on a fresh loop under tracemalloc; its result and the peak (bytes)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = asyncio.run(coro)
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


CHILD = r"""
import asyncio, json, sys
from pathlib import Path
from toolfold.execenv import LocalExecEnv
from toolfold.harness import EventBus, ToolContext, execute_tool_call
from toolfold.tools import GREP, READ

async def main():
    cwd = Path(sys.argv[1])
    out = []
    for tool, args in json.loads(sys.argv[2]):
        context = ToolContext(env=LocalExecEnv(cwd / "spill"), cwd=cwd)
        r = await execute_tool_call(
            {"read": READ, "grep": GREP}[tool], "c", args, run_id="r", turn_id="t",
            bus=EventBus(), context=context,
        )
        out.append([r.is_error, r.text])
    print(json.dumps(out))

asyncio.run(main())
"""


def run_capped(cwd: Path, calls: list[tuple[str, dict[str, Any]]], cap: int) -> list[Any]:
    """The calls' (is_error, text), run in a child whose address space is capped at
    ``cap`` bytes: a reader that holds the file dies there instead of here."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(cwd), json.dumps(calls)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=240,  # a safety net for a reader that blocks: no assertion is about time
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    return list(json.loads(child.stdout))


def test_devices_pipes_and_sockets_are_refused_in_one_line(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "sock"))
    (tmp_path / "zero.png").symlink_to("/dev/zero")  # an image name: the image path too
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.txt").write_text("needle here\n")
    os.mkfifo(tmp_path / "tree" / "pipe")
    (tmp_path / "tree" / "zero").symlink_to("/dev/zero")
    try:
        got = run_capped(
            tmp_path,
            [
                ("read", {"path": "/dev/zero"}),
                ("read", {"path": "fifo"}),
                ("read", {"path": "sock"}),
                ("read", {"path": "zero.png"}),
                ("read", {"path": "/dev/urandom", "offset": 5}),
                ("grep", {"pattern": "needle", "path": "tree"}),
                ("grep", {"pattern": "needle", "path": "fifo"}),
            ],
            cap=2048 * MiB,
        )
    finally:
        server.close()
    kinds = ["a character device", "a named pipe (FIFO)", "a socket"]
    kinds += ["a character device", "a character device"]
    for (is_error, text), kind in zip(got[:5], kinds, strict=True):
        assert is_error and "\n" not in text, text
        assert f" is {kind}, not a regular file; read and grep only read regular files" in text
        assert "use bash with a bound, e.g. timeout 5 head -c 65536 " in text
    assert got[5] == [False, "a.txt:1:needle here\n"]  # the pipe and the device are skipped
    assert got[6] == [False, "No matches for 'needle' in 1 files."]


def test_a_huge_line_is_read_in_chunks_and_the_footer_names_the_next_byte(
    tmp_path: Path,
) -> None:
    size = 256 * MiB
    sparse(tmp_path / "one-line.txt", size, head="é€x".encode() * 20_000)
    result, peak = peak_of(call(READ, {"path": "one-line.txt"}, tmp_path))
    assert peak < 8 * MiB, f"peak {peak / MiB:.1f} MiB for a {size // MiB} MiB line"
    assert not result.is_error
    assert result.text.startswith("é€xé€x")
    shown = result.text[: result.text.index("\n[Showing")]
    first = len(shown.encode())
    assert 51_200 - 3 < first <= 51_200  # the window, cut on a character boundary
    assert result.text.endswith(
        f"\n[Showing lines 1-1 of 1 (50 KiB of 256 MiB). Line 1 is cut after byte "
        f"{first:,}. Use offset=1, line_byte={first} to continue.]"
    )
    # Reading on from there shows exactly the next bytes of the line.
    nxt = asyncio.run(call(READ, {"path": "one-line.txt", "line_byte": first}, tmp_path))
    raw = (tmp_path / "one-line.txt").open("rb").read(first + 60_000)
    page = nxt.text[: nxt.text.index("\n[Showing")]
    assert raw[first:].decode("utf-8", "replace").startswith(page)
    assert f"Use offset=1, line_byte={first + len(page.encode())} to continue.]" in nxt.text


def test_grep_finds_a_match_at_the_end_of_a_huge_line_in_bounded_memory(
    tmp_path: Path,
) -> None:
    sparse(tmp_path / "big.txt", 256 * MiB, head=b"x" * 8192, tail=b" needle\nneedle too\n")
    result, peak = peak_of(call(GREP, {"pattern": "needle", "path": "big.txt"}, tmp_path))
    assert peak < 8 * MiB, f"peak {peak / MiB:.1f} MiB"
    assert result.text == (
        "big.txt:1:" + "x" * 500 + " [line cut; read offset=1, line_byte=500 for the rest]\n"
        "big.txt:2:needle too\n"
    )


def test_a_file_that_grows_faster_than_it_is_read_ends_at_its_size_when_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"".join(b"line %d\n" % i for i in range(100_000)))
    opened_at = path.stat().st_size
    appended = 0

    class Growing:
        """The opened file; each read first appends 1 MiB (up to 256 MiB)."""

        def __init__(self, f: Any) -> None:
            self._f = f

        def read(self, n: int) -> bytes:
            nonlocal appended
            if appended < 256 * MiB:
                with path.open("ab") as w:
                    w.write(b"more\n" * (MiB // 5))
                appended += MiB
            return bytes(self._f.read(n))

        def __getattr__(self, name: str) -> Any:
            return getattr(self._f, name)

        def __enter__(self) -> Growing:
            return self

        def __exit__(self, *exc: object) -> None:
            self._f.close()

    real = fileops.open_regular
    monkeypatch.setattr(fileops, "open_regular", lambda p: (lambda f, n: (Growing(f), n))(*real(p)))
    result = asyncio.run(call(READ, {"path": "log.txt"}, tmp_path))
    assert result.state is not None
    t = result.state["truncation"]
    assert t["total_bytes"] == opened_at and t["total_lines"] == 100_000
    assert appended < 256 * MiB  # the read stopped; the file was still growing
    assert result.text.endswith(
        "[Showing lines 1-2,000 of at least 100,000 (18 KiB of at least 1.0 MiB). "
        "Use offset=2001 to continue.]"
    )


def test_proc_files_report_no_size_and_are_read_whole(tmp_path: Path) -> None:
    result = asyncio.run(call(READ, {"path": "/proc/self/status"}, tmp_path))
    assert not result.is_error and result.text.startswith("Name:\t")
    assert "\nPid:\t" in result.text


def test_the_file_is_read_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader waits, mid-file, for a task on the event loop: it only finishes if
    the loop kept running while the file was being read."""
    (tmp_path / "f.txt").write_text("a\nb\n")
    gate = threading.Event()
    waited: list[bool] = []
    reached: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    class Gated:
        def __init__(self, f: Any) -> None:
            self._f = f

        def read(self, n: int) -> bytes:
            loop, event = reached[0]
            loop.call_soon_threadsafe(event.set)  # tell the loop the reader is here
            waited.append(gate.wait(timeout=60))  # a safety net, not a timing assertion
            return bytes(self._f.read(n))

        def __getattr__(self, name: str) -> Any:
            return getattr(self._f, name)

        def __enter__(self) -> Gated:
            return self

        def __exit__(self, *exc: object) -> None:
            self._f.close()

    real = fileops.open_regular
    monkeypatch.setattr(fileops, "open_regular", lambda p: (lambda f, n: (Gated(f), n))(*real(p)))

    async def both() -> ToolResult:
        reached.append((asyncio.get_running_loop(), asyncio.Event()))
        reading = asyncio.ensure_future(call(READ, {"path": "f.txt"}, tmp_path))
        await reached[0][1].wait()  # runs only if the reader left the loop free
        gate.set()
        return await reading

    result = asyncio.run(both())
    assert waited and all(waited)
    assert result.text == "a\nb\n"


def pages(path: Path, cwd: Path) -> Iterator[str]:
    args: dict[str, Any] = {"path": str(path)}
    for _ in range(100):
        result = asyncio.run(call(READ, args, cwd))
        found = re.search(
            r"\n?\[Showing .* Use offset=(\d+)(?:, line_byte=(\d+))? to continue\.\]$", result.text
        )
        if found is None:
            yield result.text
            return
        yield result.text[: found.start()]
        args = {"path": str(path), "offset": int(found[1]), "line_byte": int(found[2] or 0)}


def test_paging_by_the_footers_reads_every_byte_of_long_lines_once(tmp_path: Path) -> None:
    text = "start\n" + "ü€😀x" * 40_000 + "\nmiddle\n" + "y" * 120_000 + "\nend\n"
    (tmp_path / "long.txt").write_text(text)
    got = list(pages(tmp_path / "long.txt", tmp_path))
    assert len(got) > 4
    joined = ""
    for page in got:
        if joined and not joined.endswith("\n") and page and text[len(joined)] != page[0]:
            joined += "\n"  # a page cut just before a newline: the next one starts a line
        joined += page
    assert joined == text
