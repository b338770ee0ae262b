"""The order of a proxied result's blocks: the upstream's, whatever the window cut.

The rule: all the text blocks of a result share one window, as one stream in which
each block ends with a newline (so the window, the spill file and the totals are
the same as for one text). The result the client gets keeps the upstream's order
of blocks: each text block holds the part of the window that came from it, images
and other blocks stay between them where they were, and a text block the window
left out entirely is left out. Blocks are never merged. The footer (what was cut,
where the full text is, how to read on) ends the last text block that is shown.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Literal

import mcp_types as types

Slot = tuple[Literal["text", "image"], int] | tuple[Literal["other"], types.ContentBlock]
"""One block of the upstream's result: its text block number, the number of the image
the sink kept, or a block passed on as it is."""


@dataclass
class Layout:
    """Where the upstream's blocks were, and where each text block starts in the one
    stream the window is cut from."""

    slots: list[Slot] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    """Line index, in the joined text, of each text block's first line."""
    window: str = ""
    """The window's text (as the sink holds it, before its footer)."""
    window_line: int = 0
    """Line index, in the joined text, of the window's first line."""
    cut: bool = False
    """The window leaves something out."""

    def add_text(self, text: str) -> None:
        """The next text block (in the upstream's order)."""
        last = self.starts[-1] if self.starts else 0
        if self.starts:
            last += self._last_lines
        self.starts.append(last)
        self._last_lines = text.count("\n") + 1
        self.slots.append(("text", len(self.starts) - 1))

    _last_lines: int = 0


def _pieces(layout: Layout) -> list[str | None]:
    # The lines of the window that came from each text block (None: none did).
    pieces: list[list[str] | None] = [None for _ in layout.starts]
    if not layout.window or not layout.starts:
        return [None for _ in layout.starts]
    lines = layout.window.split("\n")
    last = layout.window_line + len(lines) - 1
    if layout.cut and layout.window.endswith("\n") and last in layout.starts:
        # The window ends with the newline that ends a block: nothing of the next
        # block is shown (that newline joined the blocks; it is no block's text).
        lines.pop()
    for n, line in enumerate(lines):
        block = max(bisect.bisect_right(layout.starts, layout.window_line + n) - 1, 0)
        piece = pieces[block]
        if piece is None:
            pieces[block] = [line]
        else:
            piece.append(line)
    return ["\n".join(p) if p is not None else None for p in pieces]


def compose(
    layout: Layout, shown: str, images: list[types.ContentBlock]
) -> list[types.ContentBlock] | None:
    """The blocks in the upstream's order (see the module docstring); ``shown`` is the
    text toolfold made (the window, then its footer), ``images`` the image blocks the
    sink kept. ``None`` when ``shown`` does not start with the window (then the
    caller keeps toolfold's own order)."""
    if not shown.startswith(layout.window):
        return None
    footer = shown[len(layout.window) :]
    pieces = _pieces(layout)
    out: list[types.ContentBlock] = []
    last_text = -1
    for slot in layout.slots:
        if slot[0] == "text":
            piece = pieces[slot[1]]
            if piece is not None:
                last_text = len(out)
                out.append(types.TextContent(type="text", text=piece))
        elif slot[0] == "image":
            if slot[1] < len(images):
                out.append(images[slot[1]])
        else:
            out.append(slot[1])
    if footer:
        if last_text >= 0:
            block = out[last_text]
            assert isinstance(block, types.TextContent)
            # The newline that ended the window may have been the blocks' joiner.
            sep = "" if block.text.endswith("\n") or footer.startswith("\n") else "\n"
            out[last_text] = types.TextContent(type="text", text=block.text + sep + footer)
        else:
            out.append(types.TextContent(type="text", text=footer.lstrip("\n")))
    return out


__all__ = ["Layout", "Slot", "compose"]
