"""The ``pytest`` tool: runs a test suite and keeps ``details`` live while it runs."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import signal
import sys
from typing import Any

from pydantic import BaseModel, Field

from toolfold.harness import Tool, ToolContext, ToolError
from toolfold.output import OutputPolicy, ToolOutput

from ._remote import remote_env, remote_pytest

PYTEST_OUTPUT = OutputPolicy(retain="tail")
"""A test run's summary is at the end: keep the tail."""

MAX_FAILURES = 50
"""Failures kept in ``details["failures"]``; later ones are only counted (details are
bounded, and fifty tracebacks are already more than a model reads)."""

_KILL_GRACE = 2.0


class PytestParams(BaseModel):
    """Arguments of the ``pytest`` tool."""

    path: str = Field(default=".", description="Test file, directory or node id to run.")
    args: list[str] = Field(
        default_factory=list, description="Extra pytest arguments, e.g. ['-k', 'slow']."
    )
    timeout: float | None = Field(
        default=None, gt=0, description="Seconds before the run is killed."
    )


def _apply_event(details: Any, event: dict[str, Any]) -> None:
    """Fold one progress event into the tracked details: each becomes one or two ops."""
    kind = event.get("event")
    if kind == "collected":
        details["total"] = int(event.get("total", 0))
    elif kind == "start":
        details["current"] = str(event.get("nodeid", ""))
    elif kind == "result":
        outcome = event.get("outcome")
        if outcome == "passed":
            details["passed"] += 1
        elif outcome == "failed":
            details["failed"] += 1
            if len(details["failures"]) < MAX_FAILURES:
                details["failures"].append(
                    {"name": str(event.get("nodeid", "")), "message": str(event.get("message", ""))}
                )
        else:
            details["skipped"] += 1
    elif kind == "finish" and "current" in details:
        del details["current"]


async def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), _KILL_GRACE)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def run_pytest(
    tool_call_id: str,
    params: PytestParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Run pytest on a path. The test output keeps its end; details carry live
    progress: total, passed, failed, skipped, the failures (name and message) and the
    test currently running. Failing tests fail the call."""
    details = out.details
    details.update({"total": 0, "passed": 0, "failed": 0, "skipped": 0, "failures": []})
    remote = remote_env(context)
    if remote is not None:
        result = await remote_pytest(
            remote, params.path, params.args, params.timeout, cancel, out, context, MAX_FAILURES
        )
        _check(params, result.exit_code, result.timed_out, cancel, out)
        return
    read_fd, write_fd = os.pipe()
    env = dict(os.environ)
    env["TOOLFOLD_PYTEST_FD"] = str(write_fd)
    env["PYTHONUNBUFFERED"] = "1"
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "pytest",
            params.path,
            "-p",
            "toolfold.tools._pytest_plugin",
            "-p",
            "no:cacheprovider",
            "--color=no",
            *params.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            cwd=context.cwd,
            env=env,
            pass_fds=(write_fd,),
            start_new_session=True,
        )
    except OSError as exc:
        os.close(read_fd)
        raise ToolError(f"Cannot start pytest: {exc}") from exc
    finally:
        os.close(write_fd)
    loop = asyncio.get_running_loop()
    events = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(events), os.fdopen(read_fd, "rb", buffering=0)
    )
    stdout = proc.stdout
    if stdout is None:  # stdout=PIPE guarantees a reader; this is only for the type checker
        raise ToolError("pytest started without a stdout pipe")

    async def pump_output() -> None:
        # Incremental: a read boundary must not split a character into two U+FFFD.
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while chunk := await stdout.read(65536):
            out.write(decoder.decode(chunk))
        out.write(decoder.decode(b"", final=True))

    async def pump_events() -> None:
        while line := await events.readline():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                _apply_event(out.details, event)

    async def run() -> None:
        await asyncio.gather(pump_output(), pump_events(), proc.wait())

    work: asyncio.Future[None] = asyncio.ensure_future(run())
    stopper: asyncio.Future[bool] = asyncio.ensure_future(cancel.wait())
    timed_out = False
    try:
        waiting: set[asyncio.Future[Any]] = {work, stopper}
        done, _ = await asyncio.wait(
            waiting, timeout=params.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if work not in done:
            timed_out = stopper not in done
            await _kill(proc)
            await work
    finally:
        stopper.cancel()
        if proc.returncode is None:
            await asyncio.shield(_kill(proc))
        transport.close()
    if "current" in out.details:
        del out.details["current"]
    _check(params, proc.returncode, timed_out, cancel, out)


def _check(
    params: PytestParams,
    code: int | None,
    timed_out: bool,
    cancel: asyncio.Event,
    out: ToolOutput,
) -> None:
    """How the run ends the call: cancelled, timed out, no tests, failures, or ok."""
    if cancel.is_set():
        return
    if timed_out:
        raise ToolError(f"pytest timed out after {params.timeout:g} seconds")
    d = out.details
    summary = f"{d['passed']} passed, {d['failed']} failed, {d['skipped']} skipped of {d['total']}"
    if code == 5:
        raise ToolError(f"pytest collected no tests in {params.path!r}")
    if code != 0:
        raise ToolError(f"pytest exited with code {code}: {summary}")


PYTEST = Tool(
    name="pytest",
    description=(run_pytest.__doc__ or "").replace("\n    ", " ").strip(),
    params=PytestParams,
    execute=run_pytest,
    output=PYTEST_OUTPUT,
    replay_safe=False,
)
"""The ``pytest`` tool definition."""
