"""What a finished ``bash`` command makes of its call's output: the capture options, the
final window, the footer (what is shown and where the rest is), the exit code and the
error the call fails with.

Plain functions of the exec env's result and the output sink, apart from the tool (which
needs the harness, and with it the event loop): ``run_bash`` calls them, and so can a
driver that runs a command without either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from toolfold._units import format_bytes
from toolfold.execenv import CaptureOptions, Replace, ShellOutputLimits

if TYPE_CHECKING:
    from toolfold.execenv import ShellExecResult, ShellOutputTruncation
    from toolfold.output import OutputPolicy, ToolOutput


def footer(result: ShellExecResult, retain: str = "tail") -> str:
    """The model-visible note on a truncated result: what is shown and where the rest is."""
    t = result.truncation
    if not t.truncated:
        return ""
    if result.spill_path:
        where = f"Full output: {result.spill_path}"
        if result.spill_note:
            where += f" ({result.spill_note})"
    elif result.spill_note:
        where = f"Full output was {result.spill_note}"
    else:
        where = "Full output was not kept"
    if retain == "head_tail":
        shown = _both_ends(t)
    elif retain == "head":
        if t.first_line_exceeds_limit:
            shown = f"Showing the first {format_bytes(t.output_bytes)} of line 1"
        else:
            shown = f"Showing lines 1-{t.output_lines:,} of {t.total_lines:,}"
    elif t.last_line_partial:
        shown = f"Showing the last {format_bytes(t.output_bytes)} of line {t.total_lines:,}"
    else:
        first = t.total_lines - t.output_lines + 1
        shown = f"Showing lines {first:,}-{t.total_lines:,} of {t.total_lines:,}"
    return f"[{shown} ({format_bytes(t.output_bytes)} of {format_bytes(t.total_bytes)}). {where}]"


def _both_ends(t: ShellOutputTruncation) -> str:
    """What a head_tail view shows: the lines before and after the cut."""
    before = t.cut_line - 1
    start = f"lines 1-{before:,}" if before > 1 else ("line 1" if before else "the start of line 1")
    after = t.cut_line + t.cut_lines
    if t.last_line_partial:
        end = f"the end of line {t.total_lines:,}"
    elif after >= t.total_lines:
        end = f"line {t.total_lines:,}"
    else:
        end = f"lines {after:,}-{t.total_lines:,}"
    if start.startswith("lines ") and end.startswith("lines "):
        end = end[len("lines ") :]
    return f"Showing {start} and {end} of {t.total_lines:,}"


def running_note(
    handle: str, waited: float | None, name: Callable[[str], str] = lambda tool: tool
) -> str:
    """The model-visible note on a command that went on in the background; ``name`` gives
    the name the model knows each background tool by."""
    return (
        f"[Still running after {waited:g} s, in the background as {handle}: "
        f'{name("bash_read")} {{"handle": "{handle}"}} shows its new output, '
        f"{name('bash_write')} sends it input, {name('bash_stop')} ends it.]"
    )


BACKGROUND_NOTE = (
    "[Background processes still holding the output were stopped after the command "
    "exited; to keep one running, redirect its output: cmd > file 2>&1 &]"
)


def bash_capture(policy: OutputPolicy, max_spill: int) -> CaptureOptions:
    """How ``bash`` captures a command: ``policy``'s window, every byte to a spill file
    of at most ``max_spill`` bytes."""
    return CaptureOptions(
        limits=ShellOutputLimits(
            max_bytes=policy.max_bytes,
            max_lines=policy.max_lines,
            retain=policy.retain,
            head_share=policy.head_share,
        ),
        spill=True,
        max_spill=max_spill,
    )


def finish_output(out: ToolOutput, result: ShellExecResult, *, timeout: float | None) -> str | None:
    """Make a command that ended (``result`` without a handle) the call's output: its
    final window, the footer (what is shown and where the rest is; a background process
    that was stopped), its exit code in ``details``. Returns the error the call fails
    with, or ``None`` (it succeeded, or it was cancelled: the caller marks that).

    ``run_bash`` raises the error as a ``ToolError``; ``toolfold run``'s direct path
    settles it the same way without a harness."""
    out.feed(Replace(result.view))
    note = footer(result, out.policy.retain)
    if result.background_killed:
        # Tell the model why a `cmd &` it started is gone, and how to keep one running.
        note = "\n".join(filter(None, [note, BACKGROUND_NOTE]))
    if note:
        # A footer sits outside the window: it neither evicts a retained line (tail)
        # nor gets cut off at the cap (head), so the model always learns what it is
        # looking at and where the rest is. It still reaches replicas as one `a`.
        text = out.text
        out.footer(("\n" if text and not text.endswith("\n") else "") + note)
    out.details["exit_code"] = result.exit_code
    if result.cancelled:
        return None  # the caller marks the call cancelled and keeps the partial output
    if result.timed_out:
        return f"Command timed out after {timeout:g} seconds"
    if result.exit_code is None:
        return "Command was killed by a signal before it exited"
    if result.exit_code != 0:
        return f"Command exited with code {result.exit_code}"
    return None
