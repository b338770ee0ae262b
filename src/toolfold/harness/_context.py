"""``ToolContext``: what a tool gets besides its params and its sink."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ._errors import MemoUnavailableError

if TYPE_CHECKING:
    import asyncio

    from toolfold.execenv import CaptureOptions, ShellExecResult, UpdateConsumer


class MemoBackend(Protocol):
    """Where memos live. The durability layer provides one per call; it commits a
    memo together with the call's output checkpoint in one transaction."""

    async def get_memo(self, name: str) -> Any:
        """The memo's value, or ``MISSING``."""
        ...

    async def set_memo(self, name: str, value: Any) -> None:
        """Set the memo (``MISSING`` deletes it) and checkpoint the output atomically."""
        ...


class ExecEnv(Protocol):
    """Where commands run: ``toolfold.execenv.LocalExecEnv``, or a remote env with the
    same ``exec`` (bounded at the source, spill file on the exec host)."""

    async def exec(
        self,
        command: str,
        *,
        cwd: Path | str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        cancel: asyncio.Event | None = None,
        capture: CaptureOptions | None = None,
        on_update: UpdateConsumer | None = None,
    ) -> ShellExecResult:
        """Run ``command``; see ``LocalExecEnv.exec``."""
        ...


@dataclass(frozen=True)
class ToolContext:
    """Everything a tool may use besides its params, ``cancel`` and ``out``.

    ``env`` is the execution environment (``toolfold.execenv``) commands run in,
    ``cwd`` the working directory relative paths resolve against. ``run_id``,
    ``turn_id`` and ``tool_call_id`` identify the call, and ``tool_name`` is the name the
    model called the tool by (a host may serve it renamed, e.g. ``toolfold_bash``); the
    harness fills them in per call with ``for_call``. ``memos`` is attached by the durability layer;
    without it ``get_memo`` / ``set_memo`` raise ``MemoUnavailableError``.
    ``extra`` carries host-specific values (keep it small). ``on_background`` is set by
    the harness per call: how a tool hands over a command that outlived the call
    (see :meth:`follow_background`).
    """

    env: ExecEnv | None = None
    cwd: Path = field(default_factory=Path.cwd)
    run_id: str = ""
    turn_id: str = ""
    tool_call_id: str = ""
    tool_name: str = ""
    memos: MemoBackend | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    on_background: Callable[[str, str], None] | None = None

    def for_call(
        self, *, run_id: str, turn_id: str, tool_call_id: str, tool_name: str = ""
    ) -> ToolContext:
        """A copy of this context identifying one call."""
        return dataclasses.replace(
            self, run_id=run_id, turn_id=turn_id, tool_call_id=tool_call_id, tool_name=tool_name
        )

    def sibling(self, name: str, own: str) -> str:
        """The name the model knows tool ``name`` by, for a tool whose own name is ``own``:
        a host that serves the tools under a prefix (``toolfold mcp proxy`` serves
        ``bash`` as ``toolfold_bash``) serves its siblings under the same one, so a hint
        names ``toolfold_bash_read``, not a ``bash_read`` the model cannot call."""
        if self.tool_name.endswith(own) and self.tool_name != own:
            return self.tool_name[: -len(own)] + name
        return name

    def with_memos(self, memos: MemoBackend | None) -> ToolContext:
        """A copy with ``memos`` attached (the durability layer's seam)."""
        return dataclasses.replace(self, memos=memos)

    def follow_background(self, handle: str, command: str) -> None:
        """The command ``handle`` of ``env.background`` outlived this call: once the call
        has settled, the harness records its further output as a call of its own (kind
        ``"background"``, linked to this call): live to every subscriber, checkpointed
        and settled when the command ends. Outside a harness this does nothing."""
        if self.on_background is not None:
            self.on_background(handle, command)

    def resolve(self, path: str | Path) -> Path:
        """``path`` resolved against ``cwd`` (absolute paths are kept)."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.cwd / p

    def _memos(self, what: str) -> MemoBackend:
        if self.memos is None:
            raise MemoUnavailableError(
                f"{what}: memos need a durable session (call {self.tool_call_id!r} has none); "
                "attach durability to the Harness, or do not memoise in this tool"
            )
        return self.memos

    async def get_memo(self, name: str) -> Any:
        """The memo ``name`` of this call, or ``MISSING`` if never set.

        A replay-safe tool checks its memos to skip work it already did (whose output
        is already in the seeded sink)."""
        return await self._memos(f"get_memo({name!r})").get_memo(name)

    async def set_memo(self, name: str, value: Any) -> None:
        """Record that work is done. Write the work's output to the sink FIRST: the
        memo commits atomically with the output checkpoint, which must contain it."""
        await self._memos(f"set_memo({name!r})").set_memo(name, value)
