"""The agent's terminal lines, driven by harness events and a hand-moved clock: a call's
end line carries its tool, totals, spill file and duration; a long call gets progress
lines; an error message with nothing received claims nothing was kept."""

from __future__ import annotations

import io

from toolfold.cli._agent_view import FIRST_PROGRESS_AFTER, PROGRESS_EVERY, AgentPrinter
from toolfold.harness import MessageEnd, MessageStart, ToolEnd, ToolStart, ToolUpdate


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _state(lines: int, size: int, spill: str | None = None) -> dict[str, object]:
    return {
        "content": [{"type": "text", "text": "x"}],
        "truncation": {"total_lines": lines, "total_bytes": size},
        **({"spill_path": spill} if spill else {}),
    }


def _printer() -> tuple[AgentPrinter, io.StringIO, Clock]:
    err, clock = io.StringIO(), Clock()
    return AgentPrinter(out=io.StringIO(), err=err, clock=clock), err, clock


def test_the_end_line_says_what_toolfold_run_says() -> None:
    printer, err, clock = _printer()
    printer.handle(ToolStart("r", "t", "c1", "bash", {"command": "make"}))
    printer.handle(ToolUpdate("r", "t", "c1", [["r", _state(3000, 2_000_000, "/s/x.log")]]))
    clock.now += 12.34
    printer.handle(ToolEnd("r", "t", "c1", is_error=True))
    assert err.getvalue().splitlines() == [
        'toolfold: -> c1 bash {"command":"make"}',
        "toolfold: <- c1 bash error · 3,000 lines / 1.9 MiB · full output: /s/x.log · 12.3 s",
    ]


def test_a_long_call_gets_a_progress_line_now_and_then() -> None:
    printer, err, clock = _printer()
    printer.handle(ToolStart("r", "t", "c1", "bash", {"command": "sleep 9"}))
    printer.tick()  # at once: nothing yet
    clock.now += FIRST_PROGRESS_AFTER
    printer.handle(ToolUpdate("r", "t", "c1", [["r", _state(1, 6)]]))
    printer.tick()
    printer.tick()  # the same moment: no second line
    clock.now += PROGRESS_EVERY - 0.5
    printer.tick()  # not yet due
    clock.now += 0.5
    printer.tick()
    printer.handle(ToolEnd("r", "t", "c1", is_error=False))
    clock.now += 60
    printer.tick()  # an ended call is not reported again
    progress = [line for line in err.getvalue().splitlines() if " .. " in line]
    assert progress == [
        f"toolfold: .. c1 bash running {FIRST_PROGRESS_AFTER:.0f} s · 1 line / 6 B so far",
        f"toolfold: .. c1 bash running {FIRST_PROGRESS_AFTER + PROGRESS_EVERY:.0f} s · "
        "1 line / 6 B so far",
    ]


def test_a_failed_message_with_nothing_received_claims_nothing_was_kept() -> None:
    printer, err, _ = _printer()
    printer.handle(MessageStart("r", "t", "m1"))
    printer.handle(MessageEnd("r", "t", "m1", stop_reason="error", is_error=True))
    assert err.getvalue() == ""
