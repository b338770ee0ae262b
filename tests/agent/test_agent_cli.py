"""``toolfold agent "task"`` as a user runs it (a real process, the real openai client, a
scripted endpoint on loopback, a SQLite store), and ``toolfold resume`` continuing a run
that kill -9 cut short mid-answer."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_helpers import checkpointed_text
from scripted_server import ScriptedServer, text_chunks, tool_chunks

from toolfold.agent import agent_run_address, rebuild_history
from toolfold.harness import ToolCall
from toolfold.storage import open_repository


def env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TOOLFOLD_"))}
    return {**base, "OPENAI_API_KEY": "test-key", **extra}


async def toolfold(
    *args: str, cwd: Path, environ: dict[str, str] | None = None
) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "toolfold.cli",
        *args,
        cwd=cwd,
        env=environ if environ is not None else env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def session_values(url: str, name: str) -> tuple[Any, list[Any], list[Any]]:
    repo = open_repository(url)
    try:
        session = await repo.open_session(name)
        record = await session.get_value(agent_run_address())
        entries = [e.value for e in await session.read_entries()]
        return record, entries, await session.live_scopes()
    finally:
        await repo.close()


async def test_agent_streams_the_answer_runs_the_tools_and_keeps_the_run(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    script = [
        tool_chunks(
            [("c1", "bash", {"command": "echo one"}), ("c2", "bash", {"command": "echo two"})]
        ),
        text_chunks("Both printed their number."),
    ]
    async with ScriptedServer(script) as server:
        code, out, err = await toolfold(
            "agent", "print two numbers", "--model", "scripted", "--base-url", server.base_url,
            "--session", "s1", "--store", url, cwd=tmp_path,
        )  # fmt: skip
    assert code == 0, err
    assert out.strip() == "Both printed their number."
    assert "-> c1 bash" in err and "-> c2 bash" in err
    # Each end line says what `toolfold run` says: the tool, totals and duration.
    ends = [line for line in err.splitlines() if line.startswith("toolfold: <- ")]
    assert [line.split(" · ")[:2] for line in sorted(ends)] == [
        ["toolfold: <- c1 bash ok", "1 line / 4 B"],
        ["toolfold: <- c2 bash ok", "1 line / 4 B"],
    ]
    assert all(line.endswith(" s") for line in ends), ends
    assert "answer after 2 turn(s)" in err
    # The model is offered exactly the documented built-in tools, never the demo's.
    from toolfold.tools import builtin_tools

    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert offered == {t.name for t in builtin_tools()}
    second = server.requests[1]["messages"]
    assert {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"} == {
        "c1": "one\n",
        "c2": "two\n",
    }
    record, entries, live = await session_values(url, "s1")
    assert record["done"] == "answer" and record["model"] == "scripted"
    assert "key" not in str(record).lower()  # the API key is never stored
    assert [e.get("role", "tool") for e in entries].count("assistant") == 2
    assert live == []


async def test_agent_without_a_key_is_a_one_line_error(tmp_path: Path) -> None:
    environ = env()
    del environ["OPENAI_API_KEY"]
    code, out, err = await toolfold(
        "agent", "t", "--model", "m", "--store", f"sqlite:{tmp_path / 's.db'}",
        cwd=tmp_path, environ=environ,
    )  # fmt: skip
    assert code == 2 and out == ""
    assert err.strip().count("\n") == 0 and "OPENAI_API_KEY" in err


async def test_kill_9_mid_answer_then_resume_continues_the_run(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    partial = "First I will look around, then "
    held = [*text_chunks(partial, 4)[:-2], "HOLD"]
    async with ScriptedServer([held, text_chunks("Done after the crash.")]) as server:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolfold.cli", "agent", "look around", "--model", "scripted",
            "--base-url", server.base_url, "--session", "s2", "--store", url,
            cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        try:
            for _ in range(600):  # bounded poll: up to about 30 s for the checkpoint
                if await checkpointed_text(url, "s2") == partial or proc.returncode is not None:
                    break
                await asyncio.sleep(0.05)
            assert await checkpointed_text(url, "s2") == partial, proc.returncode
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        code, out, err = await toolfold("resume", "s2", "--store", url, cwd=tmp_path)
    assert code == 0, err
    assert f"{len(partial)} characters of text kept" in out
    assert "continuing the agent run of session s2 after turn 1" in err
    # The model is asked again with what the crash left: the task and the partial answer.
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "look around"},
        {"role": "assistant", "content": partial},
    ]
    assert "Done after the crash." in out
    record, entries, live = await session_values(url, "s2")
    assert record["done"] == "answer"
    first, second = entries
    assert first["content"] == [{"type": "text", "text": partial}]
    assert first["stop_reason"] == "interrupted" and second["turn_id"] == "turn-2"
    assert live == []


async def test_ctrl_c_ends_with_one_line_and_130_and_resume_goes_on(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 'store.db'}"
    script = [
        tool_chunks([("c1", "bash", {"command": "sleep 60"})]),
        text_chunks("Done after Ctrl-C."),
    ]
    async with ScriptedServer(script) as server:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "toolfold.cli", "agent", "wait", "--model", "scripted",
            "--base-url", server.base_url, "--session", "s3", "--store", url,
            cwd=tmp_path, env=env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True,
        )  # fmt: skip
        assert proc.stderr is not None
        try:
            ready = b""
            for _ in range(100):  # bounded: the tool call's start line, then Ctrl-C
                if b"-> c1 bash" in ready:
                    break
                ready += await asyncio.wait_for(proc.stderr.readline(), timeout=60)
            assert b"-> c1 bash" in ready, ready
            proc.send_signal(signal.SIGINT)
            out, rest = await asyncio.wait_for(proc.communicate(), timeout=60)
            assert out == b""  # a tool-call turn has no answer text
        finally:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        err = (ready + rest).decode()
        assert proc.returncode == 130, err
        assert "Traceback" not in err and "aborted" not in err
        assert err.endswith(
            "toolfold: interrupted; `toolfold resume s3 --store sqlite:"
            f"{tmp_path / 'store.db'}` continues the run\n"
        ), err
        assert [line for line in err.splitlines() if "interrupted" in line or not line] == [
            err.splitlines()[-1]
        ]
        record, entries, live = await session_values(url, "s3")
        assert record["done"] is None and live == []
        assert entries[-1]["tool_call_id"] == "c1" and entries[-1]["outcome"] == "interrupted"
        code, out2, err2 = await toolfold("resume", "s3", "--store", url, cwd=tmp_path)
    assert code == 0, err2
    assert "Done after Ctrl-C." in out2
    record, _, live = await session_values(url, "s3")
    assert record["done"] == "answer" and live == []


def test_rebuild_history_runs_a_message_s_unsettled_calls_and_drops_cut_ones() -> None:
    def message(turn: int, stop: str, calls: list[tuple[str, str]], text: str = "") -> Any:
        content: list[Any] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool_call", "index": i, "id": cid, "name": "bash", "arguments": args}
            for i, (cid, args) in enumerate(calls)
        ]
        return {
            "role": "assistant",
            "content": content,
            "stop_reason": stop,
            "is_error": stop == "interrupted",
            "run_id": "r",
            "turn_id": f"turn-{turn}",
        }

    def result(cid: str, text: str) -> Any:
        return {"tool_call_id": cid, "content": [{"type": "text", "text": text}]}

    whole = '{"command": "ls"}'
    entries = [
        message(1, "tool_calls", [("a", whole)], "looking"),
        result("a", "x\n"),
        message(2, "interrupted", [("cut", '{"comm')], "half"),
        {**message(1, "stop", [], "another run"), "run_id": "other"},
        message(3, "tool_calls", [("b", whole), ("c", whole)]),
        result("b", "y\n"),
    ]
    history = rebuild_history(entries, task="t", system="sys", run_id="r")
    assert history.turns == 3 and history.turn_id == "turn-3"
    assert history.unanswered == [ToolCall("c", "bash", {"command": "ls"})]
    roles = [(m["role"], m.get("content")) for m in history.messages]
    assert roles == [
        ("system", "sys"),
        ("user", "t"),
        ("assistant", "looking"),
        ("tool", "x\n"),
        ("assistant", "half"),  # its cut call is dropped, never run
        ("assistant", None),
        ("tool", "y\n"),
    ]
    assert "tool_calls" not in history.messages[4]
    assert [c["id"] for c in history.messages[5]["tool_calls"]] == ["b", "c"]
    assert not history.answered
    # A whole answer without calls last: the run had ended before the crash.
    done = rebuild_history([*entries, result("c", "z"), message(4, "stop", [], "ok")], task="t",
                           system=None, run_id="r")  # fmt: skip
    assert done.answered and done.unanswered == [] and done.turns == 4
    cut = rebuild_history([*entries, message(4, "interrupted", [], "o")], task="t",
                          system=None, run_id="r")  # fmt: skip
    assert not cut.answered
