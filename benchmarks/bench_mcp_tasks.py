"""``toolfold mcp`` tasks: how soon a long call is answered with a task, and what a
``tasks/get`` costs while the call runs, each beside the request a client would
otherwise make on the same connection.

    .venv/bin/python benchmarks/bench_mcp_tasks.py [--calls 30] [--gets 200]

One ``toolfold mcp --task-after 0`` over stdio (SQLite store in a temp dir), driven by
the official SDK client on the 2026-07-28 wire with the tasks extension declared:

- **handle**: from sending ``tools/call`` (a command that keeps running) to holding
  the ``CreateTaskResult``, over ``--calls`` calls; beside it, the round trip of a
  plain ``tools/call`` of ``true`` on a server that makes no tasks (the blocking call
  a client makes without tasks; both record the call in the store first);
- **tasks/get while working**: ``--gets`` polls of a task whose command prints a line
  every 10 ms (each answer reads the live window); beside it, ``tools/list`` on the
  same connection (a request answered from memory: transport and dispatch; the
  2026-07-28 wire has no ``ping``).

Not measured: HTTP (the same handlers behind another transport), a store on another
disk, the cost of finishing a dead server's calls (a ``toolfold resume``, see
``bench_durability.py``), and what a client does between polls.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar, Literal

import anyio
import mcp_types as types
from mcp.client.extension import ClaimContext, ResultClaim
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from pydantic import ConfigDict, Field

EXT = "io.modelcontextprotocol/tasks"


class Handle(types.Result):
    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = Field(alias="resultType", default="task")
    task_id: str = Field(alias="taskId")
    status: str


class State(types.Result):
    model_config = ConfigDict(extra="allow")
    task_id: str = Field(alias="taskId")
    status: str
    status_message: str | None = Field(alias="statusMessage", default=None)


class TaskIdParams(types.RequestParams):
    task_id: str = Field(alias="taskId")


class TaskRequest(types.Request[TaskIdParams, str]):
    name_param: ClassVar[str | None] = "taskId"


async def _unused(handle: Handle, ctx: ClaimContext) -> types.CallToolResult:
    raise AssertionError("polled by hand")


def params(tmp: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "toolfold.cli", "mcp", "--store", f"sqlite:{tmp / 'store.db'}", *args],
        cwd=str(tmp),
    )


def stats(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[max(0, round(len(ordered) * 0.99) - 1)]


async def run(calls: int, gets: int) -> dict[str, tuple[float, float]]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-mcp-tasks-"))
    gate = tmp / "gate"
    claim = ResultClaim(result_type="task", model=Handle, resolve=_unused)
    out: dict[str, tuple[float, float]] = {}
    with open(tmp / "server.err", "w") as err:
        async with (
            stdio_client(params(tmp, "--session", "plain"), errlog=err) as (r, w),
            ClientSession(r, w) as plain,
        ):
            await plain.discover()
            await plain.call_tool("bash", {"command": "true"})  # warm up
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                await plain.call_tool("bash", {"command": "true"})
                samples.append(time.perf_counter() - start)
            out["plain tools/call of true"] = stats(samples)
        async with (
            stdio_client(params(tmp, "--session", "tasks", "--task-after", "0"), errlog=err) as (
                r,
                w,
            ),
            ClientSession(r, w, extensions={EXT: {}}, result_claims={EXT: [claim]}) as client,
        ):
            await client.discover()
            wait = f"while [ ! -e {gate} ]; do sleep 0.05; done"
            samples = []
            handles = []
            for _ in range(calls):
                start = time.perf_counter()
                handle = await client.call_tool("bash", {"command": wait}, allow_claimed=True)
                samples.append(time.perf_counter() - start)
                handles.append(handle)
            out["tools/call to task handle"] = stats(samples)
            gate.touch()
            busy = await client.call_tool(
                "bash",
                {"command": f"while [ ! -e {tmp / 'stop'} ]; do echo line; sleep 0.01; done"},
                allow_claimed=True,
            )
            request = TaskRequest(method="tasks/get", params=TaskIdParams(taskId=busy.task_id))
            samples, pings = [], []
            for _ in range(gets):
                start = time.perf_counter()
                state = await client.send_request(request, State)
                samples.append(time.perf_counter() - start)
                assert state.status == "working", state
                start = time.perf_counter()
                await client.list_tools()
                pings.append(time.perf_counter() - start)
            out["tasks/get while working"] = stats(samples)
            out["tools/list"] = stats(pings)
            (tmp / "stop").touch()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--gets", type=int, default=200)
    args = parser.parse_args()
    out = anyio.run(run, args.calls, args.gets)
    print("| request | p50 | p99 |")
    print("| --- | ---: | ---: |")
    for name, (p50, p99) in out.items():
        print(f"| {name} | {p50 * 1000:.1f} ms | {p99 * 1000:.1f} ms |")
    handle = out["tools/call to task handle"][0] / out["plain tools/call of true"][0]
    get = out["tasks/get while working"][0] / out["tools/list"][0]
    print(
        f"\nhandle / plain true call (p50): {handle:.2f}x; tasks/get / tools/list (p50): {get:.2f}x"
    )


if __name__ == "__main__":
    main()
