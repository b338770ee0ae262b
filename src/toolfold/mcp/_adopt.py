"""An upstream's result, bounded as it streams: text windowed and cleaned, JSON
measured, the full bytes written to a spill file piece by piece.

Nothing here holds a second whole copy of a big result: text is encoded 1 MiB of
characters at a time, fed to the execution environment's capture (``capture_for``:
the window and the terminal-escape cleanup the built-in tools use) and, once it is
past the window, written to the spill file; JSON (``structuredContent``, ``_meta``) is
encoded piece by piece (``json.JSONEncoder.iterencode``) the same way. The spill
file keeps the raw bytes; only the window is cleaned.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from toolfold.execenv import ShellOutputLimits, ShellOutputMetadata, capture_for
from toolfold.execenv import ShellOutputView as View
from toolfold.output import OutputPolicy

STEP = 1 << 20
"""Characters of a text encoded at once."""

OpenSpill = Callable[[], tuple[Path, BinaryIO]]
"""Creates a new private spill file: its path and the file open for writing."""


class LazySpill:
    """Bytes held in memory up to ``keep``, then all of them (and what follows)
    written to a spill file that ``open_spill`` creates only then."""

    def __init__(self, open_spill: OpenSpill, keep: int) -> None:
        self._open_spill = open_spill
        self._keep = keep
        self._held: list[bytes] = []
        self.size = 0
        self.path: Path | None = None
        self._file: BinaryIO | None = None

    def write(self, data: bytes, *, spill: bool = False) -> None:
        """Add ``data``; ``spill``: go to the file now even if under ``keep``."""
        self.size += len(data)
        if self._file is None and (spill or self.size > self._keep):
            self.path, self._file = self._open_spill()
            for held in self._held:
                self._file.write(held)
            self._held.clear()
        if self._file is not None:
            self._file.write(data)
        else:
            self._held.append(data)

    def held(self) -> bytes:
        """What was written, when it stayed in memory."""
        return b"".join(self._held)

    def close(self) -> None:
        """Close the spill file, if one was made."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self) -> None:
        """Close and delete the spill file (it turned out not to be needed)."""
        self.close()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None


def _encoded(texts: Iterable[str]) -> Iterator[bytes]:
    for n, text in enumerate(texts):
        if n:
            yield b"\n"
        for start in range(0, len(text), STEP):
            # surrogatepass: a lone surrogate an upstream escaped in its JSON is kept
            # in the spill as it came (the window shows U+FFFD).
            yield text[start : start + STEP].encode("utf-8", "surrogatepass")


def bound_text(texts: list[str], policy: OutputPolicy, open_spill: OpenSpill) -> tuple[View, int]:
    """``texts`` (joined by newlines) cut to ``policy``'s window and cleaned, and the
    index of the window's first line; when the window leaves something out,
    ``spill_path`` names a file with the raw bytes."""
    limits = ShellOutputLimits(
        max_bytes=policy.max_bytes,
        max_lines=policy.max_lines,
        retain=policy.retain,
        head_share=policy.head_share,
    )
    capture = capture_for(limits)
    spill = LazySpill(open_spill, 0)
    held: list[bytes] = []
    try:
        for piece in _encoded(texts):
            capture.feed(piece)
            # Raw bytes are held until the output is past the window (by bytes or
            # lines, as the capture counts them): only then is there a spill file.
            if spill.path is None and not capture.exceeds_cap:
                held.append(piece)
                continue
            for early in held:
                spill.write(early, spill=True)
            held.clear()
            spill.write(piece, spill=True)
        capture.close()
        snap = capture.snapshot()
        spill.close()
        if not snap.truncation.truncated:
            spill.discard()
    except BaseException:
        spill.discard()
        raise
    path = str(spill.path) if spill.path is not None else None
    truncation = snap.truncation
    if policy.retain == "head" and truncation.truncated and not snap.text.endswith("\n"):
        # The window ends inside a line: say so, so the "read on" hint points at
        # that line (the rest of it), not at the one after.
        truncation = dataclasses.replace(truncation, last_line_partial=True)
    metadata = ShellOutputMetadata(
        truncation=truncation, spill_path=path, last_line_bytes=snap.last_line_bytes
    )
    return View(text=snap.text, metadata=metadata), snap.start[0]


def bound_json(value: Any, limit: int, open_spill: OpenSpill) -> tuple[int, Path | None]:
    """The UTF-8 size of ``value`` as JSON and, when it is over ``limit`` bytes, the
    spill file it was written to (piece by piece, never whole in memory)."""
    spill = LazySpill(open_spill, limit)
    encoder = json.JSONEncoder(ensure_ascii=False, check_circular=False)
    batch: list[str] = []
    batched = 0
    try:
        for part in encoder.iterencode(value):
            batch.append(part)
            batched += len(part)
            if batched >= STEP:
                spill.write("".join(batch).encode("utf-8", "surrogatepass"))
                batch.clear()
                batched = 0
        spill.write("".join(batch).encode("utf-8", "surrogatepass"))
        spill.close()
    except BaseException:
        spill.discard()
        raise
    return spill.size, spill.path


__all__ = ["LazySpill", "OpenSpill", "bound_json", "bound_text"]
