"""The path rule ``read`` and ``grep`` share with ``bash`` in a sandboxed exec env: a
file the confined command could not see is not opened for the model either (secrets,
the store, the host's /tmp), whatever link leads there."""

from __future__ import annotations

import os
from collections.abc import Callable

from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext


def read_check(context: ToolContext) -> Callable[[str | os.PathLike[str]], str | None] | None:
    """The context's check (why a path may not be read, or ``None``), or ``None`` when
    its exec env is not a sandboxed local one. The env's spill directory stays readable:
    the tools page through the command's own output there."""
    env = context.env
    if not isinstance(env, LocalExecEnv) or env.sandbox is None:
        return None
    return env.sandbox.read_check(cwd=context.cwd, allow=[env.spill_dir])
