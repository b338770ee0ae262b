"""The built-in tools against a remote file system (``ToolContext(env=RemoteExecEnv(...))``).

``bash`` needs nothing here (it only calls ``env.exec``). ``read`` and ``grep`` ask the
exec host to do the file work (``RemoteExecEnv.call``), which returns one bounded
window with exact totals; the sink adopts it as a ``Replace``. Locally the same file
operations run in a worker thread (``run_file_op``), so the two read and cut alike. ``pytest`` runs through ``env.exec`` with
the host's Python, so its output is bounded and spilled there like any command; its
details (passed, failed, skipped, failures) are read from pytest's closing summary
rather than streamed live (the progress pipe of the local tool does not cross hosts).
"""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Mapping
from typing import Any

from toolfold.execenv import (
    CaptureOptions,
    ExecError,
    RemoteExecEnv,
    Replace,
    ShellExecResult,
    ShellOutputLimits,
    ShellOutputMetadata,
    ShellOutputTruncation,
    ShellOutputView,
    run_file_op,
)
from toolfold.harness import ToolContext, ToolError
from toolfold.output import ToolOutput

from ._confined import read_check
from .bash import footer


def remote_env(context: ToolContext) -> RemoteExecEnv | None:
    """The context's environment when it is remote, else ``None``."""
    env = context.env
    return env if isinstance(env, RemoteExecEnv) else None


async def call_op(
    env: RemoteExecEnv | None,
    fn: str,
    args: Mapping[str, Any],
    cancel: asyncio.Event,
    context: ToolContext | None = None,
) -> dict[str, Any]:
    """Run a file operation on the exec host, or here (in a worker thread) when ``env``
    is ``None`` — under the path rule of ``context``'s sandbox, if it has one (an exec
    host applies its own); its failure becomes the tool's error."""
    try:
        if env is None:
            check = read_check(context) if context is not None else None
            return await run_file_op(fn, args, cancel, check=check)
        return await env.call(fn, args, cancel=cancel)
    except ExecError as exc:
        raise ToolError(str(exc)) from exc


def window_update(window: Mapping[str, Any]) -> Replace:
    """The host's head window (``_fileops`` result) as an update the sink adopts whole."""
    truncation = ShellOutputTruncation(
        truncated=bool(window["truncated"]),
        truncated_by=window["truncated_by"],
        total_lines=int(window["total_lines"]),
        total_bytes=int(window["total_bytes"]),
        output_lines=int(window["output_lines"]),
        output_bytes=int(window["output_bytes"]),
        last_line_partial=False,
        first_line_exceeds_limit=bool(window["first_line_exceeds_limit"]),
        max_lines=int(window["max_lines"]),
        max_bytes=int(window["max_bytes"]),
    )
    return Replace(
        ShellOutputView(
            text=str(window["text"]),
            metadata=ShellOutputMetadata(
                truncation=truncation, last_line_bytes=int(window["last_line_bytes"])
            ),
        )
    )


_SUMMARY = re.compile(
    r"^=+ (.*\b(?:passed|failed|skipped|error|errors|deselected|no tests ran)\b.*) in [\d.]+s"
)
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+)(?: - (.*))?$", re.M)


def pytest_details(text: str, max_failures: int) -> dict[str, Any]:
    """Counts and failures from pytest's closing lines (``-rfE`` short summary)."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for line in reversed(text.splitlines()):
        found = _SUMMARY.match(line)
        if found is None:
            continue
        for n, word in _COUNT.findall(found.group(1)):
            key = {"xpassed": "passed", "xfailed": "skipped", "error": "failed", "errors": "failed"}
            counts[key.get(word, word)] += int(n)
        break
    failures = [
        {"name": name, "message": (message or "")[:2000]}
        for name, message in _FAILED.findall(text)[:max_failures]
    ]
    return {"total": sum(counts.values()), **counts, "failures": failures}


async def remote_pytest(
    env: RemoteExecEnv,
    path: str,
    args: list[str],
    timeout: float | None,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
    max_failures: int,
) -> ShellExecResult:
    """Run pytest with the exec host's Python; the output is bounded and spilled there."""
    host = await env.connect()
    command = "PYTHONUNBUFFERED=1 exec " + shlex.join(
        [host.python, "-m", "pytest", path, "-p", "no:cacheprovider", "--color=no", "-rfE", *args]
    )
    policy = out.policy
    result = await env.exec(
        command,
        cwd=str(context.cwd),
        timeout=timeout,
        cancel=cancel,
        capture=CaptureOptions(
            limits=ShellOutputLimits(
                max_bytes=policy.max_bytes,
                max_lines=policy.max_lines,
                retain=policy.retain,
                head_share=policy.head_share,
            )
        ),
        on_update=out.feed,
    )
    out.feed(Replace(result.view))
    note = footer(result, policy.retain)
    if note:  # where the whole run's output is, on the exec host
        text = out.text
        out.footer(("\n" if text and not text.endswith("\n") else "") + note)
    out.details.update(pytest_details(result.text, max_failures))
    return result
