"""``toolfold agent "task"``: the reference agent loop from the shell — a durable session,
the answer streaming to the terminal with its tool calls, and ``toolfold resume``
continuing a run a crash cut short from what the store recovered."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolfold._extras import missing_extra
from toolfold._host import hostname
from toolfold.storage import Session, set_value

from ._agent_view import AgentPrinter
from ._errors import CliError
from ._run_result import _store_flag
from ._sandbox import MODEL_SANDBOX, SandboxChoice, store_paths
from ._store import StoreSpec, open_store

API_KEY_ENV = "OPENAI_API_KEY"
"""Where the model client's key comes from (the official client's own variable; a
local server that checks no key takes any value)."""


class AgentConfigError(CliError):
    """The agent cannot start: no API key, no ``openai`` package, a bad bound."""


@dataclass
class AgentSettings:
    """Everything ``toolfold agent`` was asked to do."""

    spec: StoreSpec
    session: str
    task: str
    model: str
    base_url: str | None
    system: str | None
    max_turns: int
    sandbox: SandboxChoice = MODEL_SANDBOX
    """Confines the model's commands; recorded with the run, so a resume keeps it."""


def model_client(base_url: str | None) -> Any:
    """An ``openai.AsyncOpenAI`` for ``base_url`` with the key from ``$OPENAI_API_KEY``."""
    key = os.environ.get(API_KEY_ENV)
    if not key:
        raise AgentConfigError(
            f"set ${API_KEY_ENV} to the endpoint's API key (a local server that checks "
            "none takes any value, e.g. OPENAI_API_KEY=local)"
        )
    try:
        from openai import AsyncOpenAI
    except ImportError as exc:
        raise AgentConfigError(missing_extra("toolfold agent", "agent", exc.name)) from exc
    return AsyncOpenAI(base_url=base_url, api_key=key)


async def agent_command(settings: AgentSettings) -> int:
    """Start a durable agent run in a new (or named) session and drive it."""
    from toolfold.agent import History, agent_run_address, agent_run_record, first_messages

    if settings.max_turns < 1:
        raise AgentConfigError(f"--max-turns must be at least 1, got {settings.max_turns}")
    client = model_client(settings.base_url)
    async with open_store(settings.spec, create=True) as repo:
        session = await repo.open_session(settings.session, create=True)
        record = agent_run_record(
            settings.task,
            model=settings.model,
            base_url=settings.base_url,
            system=settings.system,
            max_turns=settings.max_turns,
            run_id=f"agent-{uuid.uuid4().hex[:12]}",
        )
        record.update(pid=os.getpid(), host=hostname(), sandbox=settings.sandbox.args())
        await session.commit([set_value(agent_run_address(), record)])
        history = History(first_messages(settings.task, settings.system))
        return await drive(session, settings.spec, settings.session, record, history, client)


async def continue_run(
    session: Session, spec: StoreSpec, session_name: str, record: dict[str, Any]
) -> int:
    """``toolfold resume``: go on with an agent run from its recovered transcript."""
    from toolfold.agent import rebuild_history

    client = model_client(record.get("base_url"))
    entries = [e.value for e in await session.read_entries() if isinstance(e.value, dict)]
    history = rebuild_history(
        entries,
        task=str(record["task"]),
        system=record.get("system"),
        run_id=str(record["run_id"]),
    )
    from toolfold.agent import agent_run_address

    if history.answered:
        await session.commit([set_value(agent_run_address(), {**record, "done": "answer"})])
        print(f"the agent run of session {session_name} had already answered", file=sys.stderr)
        return 0
    print(
        f"continuing the agent run of session {session_name} after turn {history.turns}"
        + (f" ({len(history.unanswered)} tool call(s) to run first)" if history.unanswered else ""),
        file=sys.stderr,
    )
    record = {**record, "pid": os.getpid(), "host": hostname()}
    await session.commit([set_value(agent_run_address(), record)])
    return await drive(session, spec, session_name, record, history, client)


async def drive(
    session: Session,
    spec: StoreSpec,
    session_name: str,
    record: dict[str, Any],
    history: Any,
    client: Any,
) -> int:
    """Run the loop from ``history`` with the live view; record how it ended."""
    from toolfold.agent import AgentError, agent_run_address, continue_agent
    from toolfold.execenv import LocalExecEnv
    from toolfold.harness import ToolContext, ToolLoop, background_settled

    from ._tools import offered_tools

    sandbox = recorded_sandbox(record).build(hidden=store_paths(spec))
    env = LocalExecEnv(spec.spill_dir(session_name), sandbox=sandbox)
    loop = ToolLoop(
        offered_tools(),
        session=session,
        context=ToolContext(env=env, cwd=Path.cwd()),
        run_id=str(record["run_id"]),
    )
    printer = AgentPrinter()
    remove = loop.bus.add_listener(printer.handle)
    ticker = asyncio.ensure_future(printer.tick_every_second())
    task = asyncio.ensure_future(
        continue_agent(
            history,
            client=client,
            model=str(record["model"]),
            loop=loop,
            session=session,
            max_turns=int(record["max_turns"]),
        )
    )
    signalled: list[int] = []
    running = asyncio.get_running_loop()

    def on_signal(signum: int) -> None:
        # Cancel the loop, which settles the running message and calls as interrupted
        # with what they had; the run record stays open, so `toolfold resume` goes on.
        signalled.append(signum)
        task.cancel()

    for signum in (signal.SIGINT, signal.SIGTERM):
        running.add_signal_handler(signum, on_signal, signum)
    resume = f"`toolfold resume {session_name}{_store_flag(spec)}`"
    try:
        result = await task
    except asyncio.CancelledError:
        if not signalled:
            raise
        printer.err.write(f"toolfold: interrupted; {resume} continues the run\n")
        printer.err.flush()
        return 128 + signalled[0]
    except AgentError as exc:
        raise CliError(f"{exc}; {resume} continues the run from there") from exc
    finally:
        ticker.cancel()
        for signum in (signal.SIGINT, signal.SIGTERM):
            running.remove_signal_handler(signum)
        remove()
        # Nothing the model left running in the background outlives the run.
        for read in await env.aclose():
            printer.err.write(
                f"toolfold: stopped background command {read.handle} ({read.command[:80]!r})\n"
            )
            printer.err.flush()
        await background_settled()  # the calls recording their output settle
    await session.commit([set_value(agent_run_address(), {**record, "done": result.stop})])
    tokens = result.model_usage.get("total_tokens")
    print(
        f"toolfold: {result.stop} after {result.turns} turn(s)"
        + (f" · {tokens:,} model tokens" if tokens else "")
        + f" · `toolfold show {session_name}`",
        file=sys.stderr,
        flush=True,
    )
    return 0 if result.stop in ("answer", "terminate") else 1


def recorded_sandbox(record: dict[str, Any] | None) -> SandboxChoice:
    """The sandbox an agent run was started with (``workspace-write`` for a run recorded
    before runs recorded theirs): its resume confines the model's commands alike."""
    args = record.get("sandbox") if isinstance(record, dict) else None
    if not isinstance(args, list) or len(args) < 2 or args[0] != "--sandbox":
        return MODEL_SANDBOX
    writes = tuple(str(args[i + 1]) for i, a in enumerate(args[:-1]) if a == "--sandbox-write")
    return SandboxChoice(str(args[1]), writes, "--sandbox-network" in args)


async def agent_to_continue(session: Session) -> dict[str, Any] | None:
    """The session's agent run record when that run has not ended."""
    from toolfold.agent import agent_run_address

    record = await session.get_value(agent_run_address())
    if isinstance(record, dict) and record.get("done") is None and "task" in record:
        return record
    return None


__all__ = [
    "API_KEY_ENV",
    "AgentConfigError",
    "AgentPrinter",
    "AgentSettings",
    "agent_command",
    "agent_to_continue",
    "continue_run",
]
