"""What ``toolfold agent`` shows on the terminal while the loop runs: the answer as it
streams (stdout), and each tool call's start, progress and end (stderr), with the same
totals, spill file and duration that ``toolfold run`` reports."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from toolfold import _json
from toolfold.chord import ChordError, apply
from toolfold.harness import (
    HarnessEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ToolEnd,
    ToolStart,
    ToolUpdate,
)

from ._view import call_totals

FIRST_PROGRESS_AFTER = 2.0
"""Seconds a call runs before its first progress line."""

PROGRESS_EVERY = 5.0
"""Seconds between two progress lines of one call (a log stays readable)."""


@dataclass
class _RunningCall:
    tool_name: str
    started: float
    next_note: float
    state: Any = None


class AgentPrinter:
    """The live terminal view: each assistant message's text as it streams (folded from
    its op batches, like any subscriber), and its tool calls, one line as each starts, a
    progress line now and then while it runs, and one line as it ends (on ``err``, so
    ``out`` holds only the answers)."""

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.clock = clock
        self.states: dict[str, Any] = {}
        self.printed: dict[str, int] = {}
        self.calls: dict[str, _RunningCall] = {}

    def handle(self, event: HarnessEvent) -> None:
        if isinstance(event, MessageStart):
            self.states[event.message_id] = None
            self.printed[event.message_id] = 0
        elif isinstance(event, MessageUpdate):
            state = apply(self.states.get(event.message_id), event.ops)
            self.states[event.message_id] = state
            self._print_new_text(event.message_id, state)
        elif isinstance(event, MessageEnd):
            printed = self.printed.pop(event.message_id, 0)
            if printed:
                self.out.write("\n")
                self.out.flush()
            if event.is_error and printed:
                # With nothing received there is nothing kept to speak of: the error
                # that ends the run says what failed.
                self._note(f"the message ended with {event.stop_reason} (its text is kept)")
            self.states.pop(event.message_id, None)
        elif isinstance(event, ToolStart):
            now = self.clock()
            self.calls[event.tool_call_id] = _RunningCall(
                event.tool_name, now, now + FIRST_PROGRESS_AFTER
            )
            args = _json.dumps(event.args).decode(errors="replace")
            self._note(f"-> {event.tool_call_id} {event.tool_name} {args[:160]}")
        elif isinstance(event, ToolUpdate):
            call = self.calls.get(event.tool_call_id)
            if call is not None:
                try:
                    call.state = apply(call.state, event.ops)
                except ChordError:
                    call.state = None  # the view is a convenience; the result is stored
        elif isinstance(event, ToolEnd):
            call = self.calls.pop(event.tool_call_id, None)
            outcome = "error" if event.is_error else "ok"
            if call is None:
                self._note(f"<- {event.tool_call_id} {outcome}")
                return
            parts = [f"{event.tool_call_id} {call.tool_name} {outcome}", call_totals(call.state)]
            spill = call.state.get("spill_path") if isinstance(call.state, dict) else None
            if spill:
                parts.append(f"full output: {spill}")
            parts.append(f"{self.clock() - call.started:.1f} s")
            self._note("<- " + " · ".join(parts))

    def tick(self) -> None:
        """Print a progress line for each call that has run long enough since its last."""
        now = self.clock()
        for call_id, call in self.calls.items():
            if now < call.next_note:
                continue
            call.next_note = now + PROGRESS_EVERY
            elapsed = now - call.started
            self._note(
                f".. {call_id} {call.tool_name} running {elapsed:.0f} s · "
                f"{call_totals(call.state)} so far"
            )

    async def tick_every_second(self) -> None:
        """``tick`` once a second, until cancelled."""
        while True:
            await asyncio.sleep(1.0)
            self.tick()

    def _print_new_text(self, message_id: str, state: Any) -> None:
        parts = state.get("content", []) if isinstance(state, dict) else []
        text = "".join(p.get("text", "") for p in parts if p.get("type") == "text")
        done = self.printed.get(message_id, 0)
        if len(text) > done:
            self.out.write(text[done:])
            self.out.flush()
            self.printed[message_id] = len(text)

    def _note(self, line: str) -> None:
        self.err.write(f"toolfold: {line}\n")
        self.err.flush()
