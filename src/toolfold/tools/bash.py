"""The ``bash`` tool: a shell command in the execution environment, tail-retained with a spill file."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from toolfold._units import format_bytes
from toolfold.execenv import (
    DEFAULT_MAX_SPILL,
    BackgroundLimitError,
    CaptureOptions,
    HandleError,
    Replace,
    ShellExecResult,
    ShellOutputLimits,
    ShellOutputTruncation,
)
from toolfold.harness import Tool, ToolContext, ToolError
from toolfold.output import OutputPolicy, ToolOutput

BASH_OUTPUT = OutputPolicy(retain="tail")
"""Builds and test runs matter at the end: keep a rolling tail (50 KiB / 2,000 lines)."""


if TYPE_CHECKING:
    import asyncio

    from pydantic import BaseModel

DEFAULT_YIELD = 10.0
"""Seconds ``bash`` waits before a command still running goes on in the background (as
Codex's ``exec_command``): far below any MCP client's request timeout."""
MAX_YIELD = 120.0
"""The most a model may make one call wait (``yield_after``, and the ``wait`` of the
background tools): longer waits are several calls, so no client times out on one."""


@dataclass(frozen=True, kw_only=True)
class BashParams:
    """Arguments of the ``bash`` tool."""

    command: str
    timeout: float | None = None
    yield_after: float | None = DEFAULT_YIELD
    tty: bool = False

    # A plain class with pydantic's two class methods rather than a BaseModel: the
    # common call ({"command": "..."}) is checked here, so `toolfold run` never imports
    # pydantic (about half its start-up, docs/BENCHMARKS.md). Anything else goes through
    # the equivalent pydantic model, built on first use, so coercions, error messages and
    # the JSON schema are exactly pydantic's.

    def __post_init__(self) -> None:
        if not _plain(self.command, self.timeout, self.yield_after, self.tty):
            checked = _model()(
                command=self.command,
                timeout=self.timeout,
                yield_after=self.yield_after,
                tty=self.tty,
            )
            for name, value in checked.model_dump().items():
                object.__setattr__(self, name, value)

    @classmethod
    def model_validate(cls, obj: Any) -> Self:
        """Validate the model's arguments (raises pydantic's ``ValidationError``)."""
        if isinstance(obj, cls):
            return obj
        if (
            type(obj) is dict
            and obj.keys() <= _FIELDS
            and _plain(
                obj.get("command"),
                obj.get("timeout"),
                obj.get("yield_after", DEFAULT_YIELD),
                obj.get("tty", False),
            )
        ):
            return cls(**obj)
        return cls(**_model().model_validate(obj).model_dump())

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        """The JSON schema sent to the model (pydantic's, for the same fields)."""
        return _model().model_json_schema()


_FIELDS = frozenset({"command", "timeout", "yield_after", "tty"})


def _plain(command: object, timeout: object, yield_after: object, tty: object) -> bool:
    """Whether pydantic would accept these values unchanged (an exact ``str`` command, no
    timeout or a positive ``float`` one, a ``float`` yield in range or none, a ``bool``
    tty); anything else takes pydantic's path."""
    return (
        type(command) is str
        and (timeout is None or (type(timeout) is float and timeout > 0))
        and (yield_after is None or (type(yield_after) is float and 0 < yield_after <= MAX_YIELD))
        and type(tty) is bool
    )


@functools.cache
def _model() -> type[BaseModel]:
    from pydantic import BaseModel, Field

    class BashParams(BaseModel):  # same name and docstring: they title the JSON schema
        """Arguments of the ``bash`` tool."""

        command: str = Field(description="The shell command to run (bash -c).")
        timeout: float | None = Field(
            default=None, gt=0, description="Seconds before the command is killed (default: none)."
        )
        yield_after: float | None = Field(
            default=DEFAULT_YIELD,
            gt=0,
            le=MAX_YIELD,
            description=(
                "Seconds to wait for the command to end. One still running then keeps "
                "running in the background: the result shows its output so far and a "
                "handle for bash_read, bash_write, bash_signal and bash_stop. null: wait "
                "until it ends."
            ),
        )
        tty: bool = Field(
            default=False,
            description=(
                "Run it on a pseudo-terminal (120x40), for REPLs, prompts (read -p) and "
                "programs that want a terminal."
            ),
        )

    return BashParams


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


async def run_bash(
    tool_call_id: str,
    params: BashParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
    *,
    max_spill: int = DEFAULT_MAX_SPILL,
) -> None:
    """Run a shell command (bash -c) in the working directory. Output is stdout and
    stderr interleaved; long output keeps its end, and the full output is saved to
    a file named in the footer. A non-zero exit code fails the call. A command still
    running after yield_after seconds (default 10) keeps running in the background
    (servers, watchers, prompts): the result gives a handle for bash_read, bash_write,
    bash_signal and bash_stop."""
    env = context.env
    if env is None:
        raise ToolError(
            "bash needs an execution environment, and this harness has none; "
            "configure ToolContext(env=LocalExecEnv(spill_dir))"
        )
    extra: dict[str, Any] = {}
    if params.yield_after is not None or params.tty:
        # Looked up only then: a local environment makes its registry on first use.
        background = getattr(env, "background", None)
        if params.yield_after is not None and background is not None:
            extra["yield_after"] = params.yield_after
        if params.tty:
            if background is None:
                raise ToolError(
                    "tty=true needs an execution environment that runs background commands"
                )
            extra["tty"] = True
    policy = out.policy
    capture = bash_capture(policy, max_spill)
    # The environment bounds, spills and paces at the source; the sink only adopts
    # its bounded updates (and its totals) — nothing is re-windowed or re-counted.
    try:
        result: ShellExecResult = await env.exec(
            params.command,
            cwd=context.cwd,
            timeout=params.timeout,
            cancel=cancel,
            capture=capture,
            on_update=out.feed,
            **extra,
        )
    except (BackgroundLimitError, HandleError) as exc:
        raise ToolError(str(exc)) from exc
    if result.handle is None:
        error = finish_output(out, result, timeout=params.timeout)
        if error is not None:
            raise ToolError(error)
        return
    out.feed(Replace(result.view))
    note = footer(result, policy.retain)
    running = running_note(
        result.handle, params.yield_after, lambda tool: context.sibling(tool, "bash")
    )
    note = "\n".join(filter(None, [note, running]))
    out.footer(("\n" if out.text and not out.text.endswith("\n") else "") + note)
    out.details.update({"exit_code": None, "handle": result.handle, "running": True})
    # Its further output is recorded as a call of its own (live, durable) once this
    # one has settled; the model reads it with bash_read.
    context.follow_background(result.handle, params.command)


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


def bash_tool(
    *, max_spill: int = DEFAULT_MAX_SPILL, output: OutputPolicy = BASH_OUTPUT
) -> Tool[BashParams]:
    """The ``bash`` tool with a spill cap of ``max_spill`` bytes per call (the default
    is :data:`BASH`, capped at 1 GiB) and the output policy ``output`` (e.g.
    ``OutputPolicy(retain="head_tail")`` to keep the start and the end of long output)."""

    async def execute(
        tool_call_id: str,
        params: BashParams,
        cancel: asyncio.Event,
        out: ToolOutput,
        context: ToolContext,
    ) -> None:
        await run_bash(tool_call_id, params, cancel, out, context, max_spill=max_spill)

    CaptureOptions(max_spill=max_spill)  # refuse a bad cap now, not at the first call
    return Tool(
        name="bash",
        description=(run_bash.__doc__ or "").replace("\n    ", " ").strip(),
        params=BashParams,
        execute=execute,
        output=output,
        replay_safe=False,
    )


BASH = bash_tool()
"""The ``bash`` tool definition (not replay-safe: commands have side effects)."""
