"""The ``bash`` tool: a shell command in the execution environment, tail-retained with a spill file."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from toolfold.execenv import (
    DEFAULT_MAX_SPILL,
    BackgroundLimitError,
    CaptureOptions,
    HandleError,
    Replace,
    ShellExecResult,
)
from toolfold.harness import Tool, ToolContext, ToolError
from toolfold.output import OutputPolicy, ToolOutput

# The result building is the same for a driver that runs a command without the harness:
# it lives in _bash_output (no harness, no asyncio), and is importable from here as well.
from ._bash_output import BACKGROUND_NOTE as BACKGROUND_NOTE
from ._bash_output import bash_capture as bash_capture
from ._bash_output import finish_output as finish_output
from ._bash_output import footer as footer
from ._bash_output import running_note as running_note

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
