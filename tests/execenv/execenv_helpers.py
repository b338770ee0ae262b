"""Test helpers for toolfold.execenv: a fake clock and an independent reference view."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from toolfold.execenv._capture import _ESCAPE


@dataclass
class _Handle:
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class FakeClock:
    """A deterministic clock: timers fire only inside ``advance``."""

    t: float = 0.0
    _timers: list[tuple[float, int, _Handle, Callable[[], None]]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def now(self) -> float:
        return self.t

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle()
        heapq.heappush(self._timers, (self.t + delay, next(self._seq), handle, callback))
        return handle

    def pending(self) -> int:
        return sum(1 for _, _, h, _ in self._timers if not h.cancelled)

    def advance(self, dt: float) -> None:
        target = self.t + dt
        while self._timers and self._timers[0][0] <= target:
            when, _, handle, callback = heapq.heappop(self._timers)
            self.t = max(self.t, when)
            if not handle.cancelled:
                callback()
        self.t = target


def reference_clean(raw: bytes) -> str:
    """The cleaned stream, computed on the whole output at once."""
    text = _ESCAPE.sub("", raw.decode("utf-8", "replace"))
    out = []
    for line in text.split("\n"):
        segments = [s for s in line.split("\r") if s]
        out.append(segments[-1] if segments else "")
    return "\n".join(out)


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


@dataclass(frozen=True)
class RefView:
    text: str
    truncated: bool
    truncated_by: str | None
    last_line_partial: bool
    first_line_exceeds_limit: bool


def reference_view(raw: bytes, max_bytes: int, max_lines: int, retain: str) -> RefView:
    cleaned = reference_clean(raw)
    lines = _lines(cleaned)
    by: str | None = None
    partial = first_exceeds = False
    if retain == "tail":
        chosen: list[str] = []
        used = 0
        for line in reversed(lines):
            if len(chosen) == max_lines:
                by = "lines"
                break
            size = len(line.encode())
            if used + size > max_bytes:
                by = "bytes"
                if not chosen:
                    raw_tail = line.encode()[-max_bytes:]
                    while raw_tail and 0x80 <= raw_tail[0] < 0xC0:
                        raw_tail = raw_tail[1:]
                    chosen.append(raw_tail.decode())
                    partial = True
                break
            chosen.append(line)
            used += size
        text = "".join(reversed(chosen))
    else:
        kept: list[str] = []
        used = 0
        for line in lines:
            if len(kept) == max_lines:
                by = "lines"
                break
            size = len(line.encode())
            if used + size > max_bytes:
                by = "bytes"
                first_exceeds = not kept
                kept.append(line.encode()[: max_bytes - used].decode("utf-8", "ignore"))
                break
            kept.append(line)
            used += size
        text = "".join(kept)
    truncated = text != cleaned
    return RefView(text, truncated, by if truncated else None, partial, first_exceeds)


def raw_totals(raw: bytes) -> tuple[int, int, int | None]:
    """(total_bytes, total_lines, last_line_bytes) of a raw stream."""
    total_lines = raw.count(b"\n") + (1 if raw and not raw.endswith(b"\n") else 0)
    if not raw:
        return 0, 0, None
    parts = raw.split(b"\n")
    last = parts[-2] if raw.endswith(b"\n") else parts[-1]
    return len(raw), total_lines, len(last)
