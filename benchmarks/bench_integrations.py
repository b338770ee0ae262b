"""What a framework user gains by putting toolfold tools under the loop, measured
side by side with the plain tool they would write otherwise.

The plain tool is the usual one: ``asyncio.create_subprocess_shell`` +
``communicate()``, returning the decoded stdout as the tool's result. The toolfold
tool is the built-in ``bash`` through ``toolfold.integrations.pydantic_ai`` (the
other two adapters hand the model the same text; see docs/integrations/).
Both run in a real pydantic-ai ``Agent`` on a ``FunctionModel`` that calls the
tool once and records the tool result it receives.

1. Bytes the model receives for one command writing N MB.
2. Peak Python heap (tracemalloc) during that run.
3. What survives ``kill -9`` in the middle of a command: an agent process is
   killed while its command has written part of its output; we count the lines
   recoverable afterwards (toolfold: the store's last checkpoint; the plain
   tool keeps nothing outside the process, so there is nothing to read back).

Not measured: model latency or tokens (the model is offline), CPU time, the
framework's own checkpointers (they persist finished steps, not a running call).

Run: ``.venv/bin/python benchmarks/bench_integrations.py`` (about 30 s; ``--quick``
for 1 MB only).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext
from toolfold.integrations import ToolLoop
from toolfold.integrations.pydantic_ai import run
from toolfold.tools import builtin_tools


def scripted(command: str, received: list[int]) -> FunctionModel:
    def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                if isinstance(part, ToolReturnPart):
                    received.append(len(str(part.content).encode()))
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("bash", {"command": command})])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(model)


async def plain_bash(command: str) -> str:
    """Run a shell command and return its output (the plain framework tool)."""
    proc = await asyncio.create_subprocess_shell(
        command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    return out.decode(errors="replace")


async def one_run(kind: str, command: str, work: Path) -> tuple[int, int]:
    received: list[int] = []
    tracemalloc.start()
    try:
        if kind == "plain":
            agent = Agent(scripted(command, received))
            agent.tool_plain(name="bash")(plain_bash)
            await agent.run("go")
        else:
            loop = ToolLoop(
                builtin_tools(), context=ToolContext(env=LocalExecEnv(work / "spill"), cwd=work)
            )
            await run(Agent(scripted(command, received)), "go", loop)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return received[0], peak


CHILD = r"""
import asyncio, sys
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from toolfold.execenv import LocalExecEnv
from toolfold.harness import ToolContext
from toolfold.integrations import ToolLoop
from toolfold.integrations.pydantic_ai import run
from toolfold.storage import open_repository
from toolfold.tools import builtin_tools

def model(messages, info):
    if len(messages) == 1:
        return ModelResponse(parts=[ToolCallPart("bash", {"command": sys.argv[2]})])
    return ModelResponse(parts=[TextPart("done")])

async def main():
    session = await open_repository(sys.argv[1]).open_session("bench", create=True)
    work = __import__("pathlib").Path.cwd()
    loop = ToolLoop(builtin_tools(), session=session,
                    context=ToolContext(env=LocalExecEnv(work / "spill"), cwd=work))
    await run(Agent(FunctionModel(model)), "go", loop)

asyncio.run(main())
"""


def crash_survival(work: Path) -> tuple[int, int]:
    """Kill -9 an agent mid-command; (lines the command had written, lines recovered)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "cli"))
    from cli_helpers import pending_text  # the tests' reader of a store another process writes

    url = f"sqlite:{work / 'store.db'}"
    # One line every 10 ms, each also appended to a side file: the ground truth.
    command = "for i in $(seq 1 3000); do echo line $i | tee -a written.txt; sleep 0.01; done"
    script = work / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen(
        [sys.executable, str(script), url, command],
        cwd=work,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            text = pending_text(url, "bench") or ""
            if text.count("\n") >= 200:
                break
            time.sleep(0.2)
        time.sleep(1.5)  # let the command run on past a checkpoint before the kill
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    written = (work / "written.txt").read_text().count("\n")
    recovered = (pending_text(url, "bench") or "").count("\n")
    return written, recovered


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = [1] if args.quick else [1, 16]
    print(
        "| output | plain tool: bytes to model | toolfold: bytes to model | ratio | plain: peak heap | toolfold: peak heap | ratio |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for mb in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            (work / "big.txt").write_bytes(
                b"".join(b"build step %08d ok\n" % i for i in range(mb * 1024 * 1024 // 23 + 1))[
                    : mb * 1024 * 1024
                ]
            )
            command = f"cat {work / 'big.txt'}"
            plain_bytes, plain_peak = asyncio.run(one_run("plain", command, work))
            fold_bytes, fold_peak = asyncio.run(one_run("toolfold", command, work))
        print(
            f"| {mb} MB | {plain_bytes:,} | {fold_bytes:,} | {plain_bytes / fold_bytes:.0f}x "
            f"| {plain_peak / 1e6:.1f} MB | {fold_peak / 1e6:.1f} MB | {plain_peak / fold_peak:.1f}x |"
        )
    with tempfile.TemporaryDirectory() as tmp:
        written, recovered = crash_survival(Path(tmp))
    print()
    print(
        "| kill -9 mid-command | lines the command had written | lines recoverable after the crash |"
    )
    print("| --- | ---: | ---: |")
    print(f"| plain tool | {written} | 0 (no store of a running call) |")
    print(f"| toolfold (SQLite store, 1 s checkpoints) | {written} | {recovered} |")


if __name__ == "__main__":
    main()
