"""What ``toolfold run`` shows while a command runs: a live rich window, or plain status lines."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from toolfold._units import format_bytes, plural
from toolfold.chord import ChordError, apply
from toolfold.output import output_text

# asyncio is imported where a view runs on the event loop, and the harness's events where
# the watcher is handed one: the status and summary lines need neither (a run without a
# loop or a harness shows the same lines).
if TYPE_CHECKING:
    import asyncio

    from rich.console import Console, Group
    from rich.live import Live

    from toolfold.harness.events import HarnessEvent

FRAME_INTERVAL = 0.125
"""Seconds between two frames of the live view (8 frames/s: smooth, and cheap)."""

PLAIN_STATUS_INTERVAL = 5.0
"""Seconds between two progress lines in plain (non-TTY) mode: enough for a CI log to
show that a long command is alive, not so many that the log drowns in them."""


human_bytes = format_bytes
"""``1536`` -> ``"1.5 KiB"`` (the project's one byte formatter)."""


def last_lines(text: str, count: int) -> str:
    """The last ``count`` lines of ``text`` without splitting all of it (the window can
    be megabytes when the limits are raised)."""
    end = len(text)
    if text.endswith("\n"):
        end -= 1
    cut = end
    for _ in range(count):
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            return text[:end]
    return text[cut + 1 : end]


def call_totals(state: Any) -> str:
    """``N lines / SIZE`` of everything a call wrote so far (exact totals, not the window)."""
    t = (state.get("truncation") if isinstance(state, dict) else None) or {}
    return (
        f"{plural(int(t.get('total_lines', 0)), 'line')} / "
        f"{human_bytes(int(t.get('total_bytes', 0)))}"
    )


class CallWatcher:
    """Folds one call's ``ToolUpdate`` ops into its output state, as any replica does,
    and counts what a status line reports. A sync bus listener: it never blocks."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.state: Any = None
        self.updates = 0
        self.settled: dict[str, Any] | None = None
        self.tool_call_id: str | None = None
        self.fold_error: str | None = None

    def handle(self, event: HarnessEvent) -> None:
        """Bus listener: fold updates of the watched call."""
        from toolfold.harness.events import ToolSettled, ToolStart, ToolUpdate

        if isinstance(event, ToolStart) and self.tool_call_id is None:
            self.tool_call_id = event.tool_call_id
        elif isinstance(event, ToolUpdate) and event.tool_call_id == self.tool_call_id:
            self.fold(event.ops)
        elif isinstance(event, ToolSettled) and event.tool_call_id == self.tool_call_id:
            self.settled = event.message

    def fold(self, ops: list[Any]) -> None:
        """Fold one batch of the watched call's ops (what its ``ToolUpdate`` carries; a
        run without a harness hands them over as its sink's stream yields them)."""
        self.updates += 1
        try:
            self.state = apply(self.state, ops)
        except ChordError as exc:
            # The view is a convenience; the durable result does not depend on it.
            self.fold_error = str(exc)

    @property
    def elapsed(self) -> float:
        """Seconds since the watcher was made."""
        return self._clock() - self.started

    @property
    def text(self) -> str:
        """The retained window's text so far."""
        return output_text(self.state)

    def status(self, *, with_spill: bool = True) -> str:
        """``lines/bytes so far · what is shown · elapsed · updates/s · spill file``.

        The spill path comes last: it is long, and a narrow terminal crops from the right.
        """
        state = self.state if isinstance(self.state, dict) else {}
        t = state.get("truncation") or {}
        total_lines = int(t.get("total_lines", 0))
        total_bytes = int(t.get("total_bytes", 0))
        shown_lines = int(t.get("output_lines", total_lines))
        shown_bytes = int(t.get("output_bytes", total_bytes))
        if t.get("truncated"):
            shown = f"showing {plural(shown_lines, 'line')} / {human_bytes(shown_bytes)}"
        else:
            shown = "showing all"
        elapsed = self.elapsed
        rate = self.updates / elapsed if elapsed > 0 else 0.0
        parts = [
            f"{plural(total_lines, 'line')} / {human_bytes(total_bytes)} so far",
            shown,
            f"{elapsed:.1f} s",
            f"{rate:.1f} updates/s",
        ]
        if with_spill:
            parts.append(self.spill_note())
        return " · ".join(parts)

    def spill_note(self) -> str:
        """``spill: PATH`` or ``no spill file``."""
        state = self.state if isinstance(self.state, dict) else {}
        spill = state.get("spill_path")
        return f"spill: {spill}" if spill else "no spill file"


class LiveView:
    """A bounded live window plus a status line on a terminal (rich), redrawn from the
    event loop (no refresh thread touches the folded state while the loop mutates it)."""

    def __init__(self, watcher: CallWatcher, title: str, console: Console | None = None) -> None:
        # rich is imported only here, for a terminal: a `run` whose output goes to a
        # pipe never pays for importing it.
        from rich.console import Console

        self.watcher = watcher
        self.title = title
        self.console = console if console is not None else Console(stderr=True)
        self._live: Live | None = None
        self._task: asyncio.Task[None] | None = None

    def render(self) -> Group:
        """The current frame: title, the last lines of the window, the status line."""
        from rich.console import Group
        from rich.text import Text

        height = max(3, self.console.size.height - 5)
        width = max(20, self.console.size.width)
        lines = last_lines(self.watcher.text, height).split("\n")
        body = Text("\n".join(line[:width] for line in lines), no_wrap=True, overflow="crop")
        status = Text(
            self.watcher.status(with_spill=False), style="bold", no_wrap=True, overflow="ellipsis"
        )
        spill = Text(self.watcher.spill_note(), style="dim", no_wrap=True, overflow="ellipsis")
        title = Text(self.title, style="dim", no_wrap=True, overflow="ellipsis")
        return Group(title, body, status, spill)

    def note(self, message: str) -> None:
        """Print one line above the live window."""
        from rich.text import Text

        self.console.print(Text(f"toolfold: {message}"))

    async def _frames(self) -> None:
        import asyncio

        while True:
            if self._live is not None:
                self._live.update(self.render(), refresh=True)
            await asyncio.sleep(FRAME_INTERVAL)

    def start(self) -> None:
        """Begin drawing (needs a running loop)."""
        from rich.live import Live

        self._live = Live(
            self.render(),
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._live.start()
        import asyncio

        self._task = asyncio.get_running_loop().create_task(self._frames())

    async def stop(self) -> None:
        """Stop drawing and clear the window (the final result is printed after)."""
        if self._task is not None:
            import asyncio

            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._live is not None:
            self._live.stop()


class PlainView:
    """Non-TTY progress: a status line on ``stream`` at most every
    :data:`PLAIN_STATUS_INTERVAL` seconds while something changed; no escape codes."""

    def __init__(self, watcher: CallWatcher, title: str, stream: TextIO | None = None) -> None:
        self.watcher = watcher
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self._task: asyncio.Task[None] | None = None

    async def _lines(self) -> None:
        import asyncio

        seen = -1
        while True:
            await asyncio.sleep(PLAIN_STATUS_INTERVAL)
            if self.watcher.updates != seen:
                seen = self.watcher.updates
                print(f"toolfold: {self.watcher.status()}", file=self.stream, flush=True)

    def note(self, message: str) -> None:
        """Print one line on the status stream."""
        print(f"toolfold: {message}", file=self.stream, flush=True)

    def start(self) -> None:
        """Print the title and begin the periodic status lines."""
        print(f"toolfold: {self.title}", file=self.stream, flush=True)
        import asyncio

        self._task = asyncio.get_running_loop().create_task(self._lines())

    async def stop(self) -> None:
        """Stop the status lines."""
        if self._task is not None:
            import asyncio

            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
