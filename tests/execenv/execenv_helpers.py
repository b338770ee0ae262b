"""Test helpers for toolfold.execenv: a fake clock and an independent reference view."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field


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


def _run_of(text: str, i: int, lo: str, hi: str, most: int) -> int:
    """The end of the run of at most ``most`` characters in ``lo``..``hi`` starting at ``i``
    (it may be longer than ``most``: the caller then sees a character that is not a final)."""
    j = i
    while j < len(text) and lo <= text[j] <= hi and j - i <= most:
        j += 1
    return j


def _csi_end(text: str, i: int) -> int | None:
    """Parameters (0x30-0x3F, at most 64), intermediates (0x20-0x2F, at most 16), then a
    final character (0x40-0x7E): the index after it, or None."""
    j = _run_of(text, i, "0", "?", 64)
    if j - i > 64:
        return None
    k = _run_of(text, j, " ", "/", 16)
    if k - j > 16:
        return None
    return k + 1 if k < len(text) and "@" <= text[k] <= "~" else None


def _escape_end(text: str, i: int) -> int | None:
    """``text[i]`` is ESC: the index after the whole sequence, or None when it is not one."""
    j = i + 1
    if j >= len(text):
        return None
    c = text[j]
    if c == "[":
        return _csi_end(text, j + 1)
    if c == "]":  # OSC: at most 512 characters other than BEL, ESC and newline, then BEL or ST
        k = j + 1
        while k < len(text) and text[k] not in "\x07\x1b\n" and k - j - 1 < 512:
            k += 1
        if text.startswith("\x07", k):
            return k + 1
        if text.startswith("\x1b\\", k):
            return k + 2
        return None
    if " " <= c <= "/":  # nF: 1-4 intermediates, then a final 0x30-0x7E
        k = _run_of(text, j, " ", "/", 4)
        if k - j <= 4 and k < len(text) and "0" <= text[k] <= "~":
            return k + 1
        return None
    if "0" <= c <= "~" and c not in "[]":  # a two-character escape
        return j + 1
    return None


def strip_controls(text: str) -> str:
    """Terminal control noise removed, written from docs/execenv.md's definition as a
    character scanner (sharing nothing with the capture's regular expression): complete
    ESC sequences (CSI, OSC, nF, two-character) and 8-bit CSI sequences go whole; any other
    C0 control but tab, newline and CR, DEL, every C1 control and the bidirectional
    controls (U+202A-U+202E, U+2066-U+2069) go one by one (so an ESC or
    U+009B that starts no complete sequence goes alone)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        end = (
            _escape_end(text, i) if c == "\x1b" else _csi_end(text, i + 1) if c == "\x9b" else None
        )
        if end is not None:
            i = end
            continue
        code = ord(c)
        if (
            (code < 0x20 and c not in "\t\n\r")
            or 0x7F <= code <= 0x9F
            or 0x202A <= code <= 0x202E
            or 0x2066 <= code <= 0x2069
        ):
            i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def reference_clean(raw: bytes) -> str:
    """The cleaned stream, computed on the whole output at once."""
    text = strip_controls(raw.decode("utf-8", "replace"))
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
    head: str | None = None  # head_tail: the head part, when the middle is cut


def reference_view(
    raw: bytes, max_bytes: int, max_lines: int, retain: str, head_share: float = 0.2
) -> RefView:
    if retain == "head_tail":
        return _reference_head_tail(raw, max_bytes, max_lines, head_share)
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


def _share(cap: int, share: float) -> int:
    return min(cap - 1, max(1, int(cap * share)))


def _reference_head_tail(raw: bytes, max_bytes: int, max_lines: int, share: float) -> RefView:
    """The whole output while it fits both caps; else its head under the head's share of
    the caps followed by its tail under the rest (computed with the line-walking
    references above, not the window code)."""
    whole = reference_view(raw, max_bytes, max_lines, "head")
    if not whole.truncated:
        return whole
    hb, hl = _share(max_bytes, share), _share(max_lines, share)
    head = reference_view(raw, hb, hl, "head")
    tail = reference_view(raw, max_bytes - hb, max_lines - hl, "tail")
    return RefView(
        head.text + tail.text,
        True,
        whole.truncated_by,
        tail.last_line_partial,
        "\n" not in head.text,
        head.text,
    )
