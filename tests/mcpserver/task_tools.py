"""Tools the MCP task tests serve with ``--tools task_tools:TOOLS``."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from toolfold.harness import tool


class GateParams(BaseModel):
    gate: str
    """A file: the tool waits until it exists."""
    lines: int = 0
    """Lines printed once through the gate (``line 1`` ...)."""


@tool(params=GateParams, replay_safe=True)
async def gated(tool_call_id: str, params: GateParams, cancel: Any, out: Any, context: Any) -> None:
    """Say it started, wait until the gate file exists, then say it is done. Safe to run again."""
    out.write("waiting for the gate\n")
    while not Path(params.gate).exists():
        if cancel.is_set():
            return
        await asyncio.sleep(0.02)
    out.write("through the gate\n")
    out.write("".join(f"line {i}\n" for i in range(1, params.lines + 1)))


class TouchParams(BaseModel):
    gate: str
    """A file: the tool waits until it exists."""
    target: str
    """The file the tool then creates with a command in its exec env."""


@tool(params=TouchParams, replay_safe=True)
async def gated_touch(
    tool_call_id: str, params: TouchParams, cancel: Any, out: Any, context: Any
) -> None:
    """Wait until the gate file exists, then run ``touch TARGET`` in the exec env (where
    a sandbox applies). Safe to run again."""
    out.write("waiting for the gate\n")
    while not Path(params.gate).exists():
        if cancel.is_set():
            return
        await asyncio.sleep(0.02)
    result = await context.env.exec(f"touch {shlex.quote(params.target)}; echo touched $?")
    out.write(result.text)


class AskParams(BaseModel):
    size: int
    """Characters of the question."""


@tool(params=AskParams)
async def ask_big(
    tool_call_id: str, params: AskParams, cancel: Any, out: Any, context: Any
) -> None:
    """Ask the client a question ``size`` characters long, then say what it answered."""
    from toolfold.mcp import ask_client

    question = {"method": "elicitation/create", "params": {"message": "?" * params.size}}
    answers = await ask_client({"q": question})
    out.write(f"answered: {answers['q']}\n")


class RefuseParams(BaseModel):
    gate: str = ""
    """A file: the tool waits until it exists (``""``: no wait)."""
    plain: bool = False
    """Raise an ordinary exception instead of a ``ProtocolError``."""


REFUSAL = (-32042, "the backend refused the job", {"backend": "b1", "retry": False})
"""The JSON-RPC error ``refuse`` fails its request with: (code, message, data)."""


@tool(params=RefuseParams, replay_safe=True)
async def refuse(
    tool_call_id: str, params: RefuseParams, cancel: Any, out: Any, context: Any
) -> None:
    """Say it started, wait for the gate (if any), then fail the request itself with a
    JSON-RPC error (or, with ``plain``, fail as a tool). Safe to run again."""
    from toolfold.mcp import ProtocolError

    out.write("asking the backend\n")
    while params.gate and not Path(params.gate).exists():
        if cancel.is_set():
            return
        await asyncio.sleep(0.02)
    if params.plain:
        raise RuntimeError("the backend refused the job")
    raise ProtocolError(*REFUSAL)


TOOLS = [gated, gated_touch, ask_big, refuse]
