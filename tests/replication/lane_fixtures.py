"""Helpers for the replication tests: synthetic tool streams and an SSE replica client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from toolfold.chord import ChordError, Decoder, apply, is_base, utf16_len
from toolfold.harness.events import (
    HarnessEvent,
    RunEnd,
    RunStart,
    ToolEnd,
    ToolSettled,
    ToolStart,
    ToolUpdate,
)

TEXT = ["content", 0, "text"]
WORDS = ["build", "ok", "😀", "漢字", "テスト", "🇯🇵", "naïve", "→", "👩‍💻", "中文输出", "x" * 7]


def line_text(i: int) -> str:
    """A varied line with emoji and CJK (different on every i)."""
    return f"{i:05d} " + " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 1 + i % 6)) + "\n"


def tool_state(text: str = "", max_lines: int = 200) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "details": {},
        "terminate": False,
        "truncation": {
            "truncated": False,
            "truncated_by": None,
            "total_lines": 0,
            "total_bytes": 0,
            "output_lines": 0,
            "output_bytes": 0,
            "max_lines": max_lines,
            "max_bytes": 1 << 20,
        },
    }


def tail_stream(
    tool_call_id: str,
    *,
    run_id: str = "run1",
    lines: int = 3000,
    window: int = 200,
    per_update: int = 7,
    lane: str = "main",
    with_run: bool = True,
) -> Iterator[HarnessEvent]:
    """A tool call whose text is a rolling window of the last ``window`` lines.

    Each update is what a tail-retaining sink emits: ``t`` (drop the oldest
    lines, counted in UTF-16 units) + ``a`` (the new lines) + totals.
    """
    if with_run:
        yield RunStart(run_id, lane=lane)
    yield ToolStart(run_id, "turn1", tool_call_id, "bash", {"command": f"seq {lines}"})
    yield ToolUpdate(run_id, "turn1", tool_call_id, [["r", tool_state(max_lines=window)]])
    kept: list[str] = []
    total_bytes = 0
    for start in range(0, lines, per_update):
        chunk = [line_text(i) for i in range(start, min(lines, start + per_update))]
        kept.extend(chunk)
        total_bytes += sum(len(c.encode()) for c in chunk)
        ops: list[list[Any]] = []
        drop = len(kept) - window
        if drop > 0:
            dropped = "".join(kept[:drop])
            del kept[:drop]
            ops.append(["t", TEXT, utf16_len(dropped)])
        ops.append(["a", TEXT, "".join(chunk)])
        total = min(lines, start + per_update)
        ops.append(["s", ["truncation", "total_lines"], total])
        ops.append(["s", ["truncation", "total_bytes"], total_bytes])
        ops.append(["s", ["truncation", "output_lines"], len(kept)])
        if drop > 0:
            ops.append(["s", ["truncation", "truncated"], True])
        yield ToolUpdate(run_id, "turn1", tool_call_id, ops)
    yield ToolUpdate(run_id, "turn1", tool_call_id, [["s", ["details", "exit_code"], 0]])
    yield ToolEnd(run_id, "turn1", tool_call_id, is_error=False)
    yield ToolSettled(
        run_id,
        "turn1",
        tool_call_id,
        {
            "role": "tool_result",
            "tool_call_id": tool_call_id,
            "tool_name": "bash",
            "content": [{"type": "text", "text": "".join(kept)}],
            "details": {"exit_code": 0},
            "is_error": False,
        },
    )
    if with_run:
        yield RunEnd(run_id)


class SSEReplica:
    """An SSE consumer that folds a lane the way the viewer does.

    On a gap, an unknown id or a batch that cannot apply, it drops the replica
    and subscribes again (there is no resume). ``skip_next`` simulates a batch
    lost in transit.
    """

    def __init__(self, client: httpx.Client, url: str) -> None:
        self.client = client
        self.url = url
        self.value: Any = None
        self.subscriptions = 0
        self.resubscribe_reasons: list[str] = []
        self.bases = 0
        self.batches = 0
        self.skip_next = 0
        self._cm: Any = None
        self._events: Iterator[tuple[int, str]] | None = None
        self._decoder = Decoder()
        self._expected = 0

    def _open(self) -> None:
        self.close()
        self._cm = self.client.stream("GET", self.url, timeout=httpx.Timeout(60.0))
        response = self._cm.__enter__()
        if response.status_code != 200:
            raise AssertionError(f"GET {self.url} answered {response.status_code}")
        assert response.headers["content-type"].startswith("text/event-stream")
        self._events = _parse_sse(response.iter_lines())
        self._decoder = Decoder()
        self._expected = 0
        self.value = None
        self.subscriptions += 1

    def close(self) -> None:
        if self._cm is not None:
            self._cm.__exit__(None, None, None)
            self._cm = None

    def _resubscribe(self, reason: str) -> None:
        self.resubscribe_reasons.append(reason)
        self._open()

    def step(self) -> tuple[int, list[Any]]:
        """Read and fold one batch; returns (id, wire)."""
        if self._events is None:
            self._open()
        while True:
            assert self._events is not None
            try:
                event_id, data = next(self._events)
            except StopIteration:
                raise AssertionError("the SSE stream ended") from None
            if self.skip_next:
                self.skip_next -= 1
                continue
            if event_id != self._expected:
                self._resubscribe(f"gap: expected {self._expected}, got {event_id}")
                continue
            wire = json.loads(data)
            if event_id == 0 and not is_base(wire):
                raise AssertionError(f"first batch of a subscription is not a base: {data[:200]}")
            try:
                self.value = apply(self.value, self._decoder.decode(wire))
            except ChordError as exc:
                self._resubscribe(f"{type(exc).__name__}: {exc}")
                continue
            self._expected += 1
            self.batches += 1
            if is_base(wire):
                self.bases += 1
            return event_id, wire

    def fold_until(self, expected: Any, max_batches: int = 100_000) -> None:
        """Fold batches until the replica equals ``expected``."""
        for _ in range(max_batches):
            if self.value == expected and self._events is not None:
                return
            self.step()
        raise AssertionError(f"replica did not converge after {max_batches} batches")


def _parse_sse(lines: Iterator[str]) -> Iterator[tuple[int, str]]:
    event_id: int | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                if event_id is None:
                    raise AssertionError("an SSE event without an id")
                yield event_id, "\n".join(data)
            event_id, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("id:"):
            event_id = int(line[3:].strip())
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
