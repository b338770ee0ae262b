"""Background commands on an exec host over a real OpenSSH server on loopback: a dev
server started, queried, read and stopped; a prompt answered; a REPL on a terminal; the
limit and unknown handles as the same errors; and nothing left once the client goes."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import pytest

from sshd_fixture import EXEC_HOST, SSHServer, read_pid, wait_gone
from toolfold.execenv import HandleError, RemoteExecEnv
from toolfold.output import output_text

PY = sys.executable
BOUND = 60.0


def poll(probe: object, what: str, tries: int = 600) -> None:
    """Call ``probe`` until it is true, at most ``tries`` times, 50 ms apart."""
    for _ in range(tries):
        if probe():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"gave up waiting for {what}")


async def output_until(env: RemoteExecEnv, text: str, handle: str, until: str) -> str:
    while until not in text:
        read = await env.background.read(handle, wait=BOUND, until=until)
        assert read.running, f"ended before {until!r}: {text + read.text!r}"
        text += read.text
    return text


async def test_a_dev_server_over_ssh(sshd_server: SSHServer, tmp_path: Path) -> None:
    async with RemoteExecEnv(sshd_server.transport(), spill_dir=str(tmp_path)) as env:
        started = await asyncio.wait_for(
            env.exec(
                f"echo $$ > {tmp_path}/pid; exec {PY} -u -m http.server --bind 127.0.0.1 0",
                yield_after=0.3,
            ),
            BOUND,
        )
        handle = started.handle
        assert handle is not None and started.exit_code is None
        seen = await output_until(env, started.text, handle, "Serving HTTP")
        port = re.search(r"port (\d+)", seen).group(1)  # type: ignore[union-attr]
        await env.background.read(handle)
        fetched = await env.exec(
            f"{PY} -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/x.txt')\"",
        )
        assert fetched.exit_code == 1  # a 404: the server still logs the request
        log = await env.background.read(handle)
        assert '"GET /x.txt HTTP/1.1" 404' in log.text and log.running
        [info] = await env.background.commands()
        assert info.handle == handle and info.running
        stopped = await env.background.stop(handle)
        assert stopped.ended == "stopped" and not stopped.running
        assert await asyncio.to_thread(wait_gone, info.pid)
        assert await env.background.commands() == []
        with pytest.raises(HandleError, match=f"no background command '{handle}'"):
            await env.background.read(handle)


async def test_a_prompt_and_a_repl_over_ssh(sshd_server: SSHServer, tmp_path: Path) -> None:
    async with RemoteExecEnv(sshd_server.transport(), spill_dir=str(tmp_path)) as env:
        script = "a = input('Proceed? [y/N] '); print('answer:', a)"
        started = await env.exec(f'{PY} -c "{script}"', yield_after=0.3)
        assert started.handle is not None
        await output_until(env, started.text, started.handle, "Proceed?")
        answered = await env.background.write(started.handle, "y\n", wait=BOUND)
        assert answered.text == "answer: y\n" and answered.exit_code == 0
        repl = await env.exec(f"{PY} -q -i", yield_after=0.3, tty=True)
        assert repl.handle is not None
        await output_until(env, repl.text, repl.handle, ">>> ")
        await env.background.resize(repl.handle, 90, 20)
        got = await env.background.write(
            repl.handle,
            "import os; print(6 * 7, os.get_terminal_size())\n",
            wait=BOUND,
            until="lines=",
        )
        assert "42 os.terminal_size(columns=90, lines=20)" in got.text


async def test_closing_the_client_stops_the_remote_command(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    env = RemoteExecEnv(sshd_server.transport(), spill_dir=str(tmp_path))
    started = await env.exec("echo $$; exec sleep 1000", yield_after=0.3)
    assert started.handle is not None
    text = await output_until(env, started.text, started.handle, "\n")
    pid = int(text.split()[0])
    await env.aclose()
    assert await asyncio.to_thread(wait_gone, pid)


async def test_a_remote_commands_output_is_a_live_call_of_its_own(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    from toolfold.chord import apply
    from toolfold.harness import Harness, HarnessEvent, ToolCall, ToolContext, ToolSettled
    from toolfold.harness import ToolUpdate as Update
    from toolfold.tools import BASH

    events: list[HarnessEvent] = []
    outputs: dict[str, object] = {}
    changed = asyncio.Event()

    def listen(event: HarnessEvent) -> None:
        events.append(event)
        if isinstance(event, Update):
            outputs[event.tool_call_id] = apply(outputs.get(event.tool_call_id), event.ops)
        changed.set()

    def text(call_id: str) -> str:
        out = outputs.get(call_id)
        return "".join(b["text"] for b in out["content"] if b["type"] == "text") if out else ""  # type: ignore[index]

    async def until(check: object) -> None:
        async with asyncio.timeout(BOUND):
            while not check():  # type: ignore[operator]
                changed.clear()
                await changed.wait()

    async with RemoteExecEnv(sshd_server.transport(), spill_dir=str(tmp_path)) as env:
        harness = Harness([BASH], context=ToolContext(env=env, cwd=tmp_path))
        harness.bus.add_listener(listen)
        command = f"exec {PY} -u -m http.server --bind 127.0.0.1 0"
        [started] = await harness.run(
            [ToolCall("c1", "bash", {"command": command, "yield_after": 0.3})]
        )
        handle = started.details["handle"]
        bg = f"c1.{handle}"
        # Its output after the call settled comes over the connection, as ops of c1.bg-1.
        await until(lambda: "Serving HTTP" in text(bg))
        port = re.search(r"port (\d+)", text(bg)).group(1)  # type: ignore[union-attr]
        fetch = f"{PY} -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:{port}/')\""
        [fetched] = await harness.run([ToolCall("c2", "bash", {"command": fetch})])
        assert not fetched.is_error
        await until(lambda: '"GET / HTTP/1.1" 200' in text(bg))
        # The model's reads are unaffected: the new bytes since its last read.
        read = await env.background.read(handle)
        assert '"GET / HTTP/1.1" 200' in read.text
        await env.background.stop(handle)
        await until(
            lambda: any(isinstance(e, ToolSettled) and e.tool_call_id == bg for e in events)
        )
    [settled] = [e for e in events if isinstance(e, ToolSettled) and e.tool_call_id == bg]
    assert settled.message["kind"] == "background" and settled.message["outcome"] == "ok"
    assert settled.message["details"]["ended"] == "stopped"
    assert settled.message["content"][0]["text"].endswith(f"[{handle} was stopped]")


def test_kill_9_of_the_host_then_resume_marks_the_remote_background_call(
    sshd_server: SSHServer, tmp_path: Path
) -> None:
    import json
    import os
    import signal
    import subprocess

    from toolfold.history import list_calls, pending_output
    from toolfold.storage import open_repository

    store = f"sqlite:{tmp_path / 'toolfold.db'}"
    pid_file = tmp_path / "pid"
    child = subprocess.Popen(
        [
            PY,
            str(Path(__file__).with_name("bg_crash_child.py")),
            store,
            sshd_server.destination,
            json.dumps(sshd_server.options),
            f"{EXEC_HOST} --spill-dir {tmp_path / 'remote-spill'}",
            str(tmp_path),
            f"echo $$ > {pid_file}; echo first; exec sleep 1000",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    async def checkpointed() -> str:
        repo = open_repository(store, read_only=True)
        try:
            session = await repo.open_session("s")
            calls = {c.tool_call_id: c for c in await list_calls(session)}
            call = calls.get("c1.bg-1")
            state = (
                await pending_output(session, call)
                if call is not None and not call.settled
                else None
            )
            return output_text(state) if isinstance(state, dict) else ""
        finally:
            await repo.close()

    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "bg-1"
        pid = read_pid(pid_file)
        # While it runs, its output call is checkpointed on this side.
        poll(lambda: asyncio.run(checkpointed()) == "first\n", "the background call's checkpoint")
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the host dies; its ssh client is orphaned
        child.wait()
    # The exec host saw its connection end and stopped the command: nothing to re-attach.
    assert wait_gone(pid, 30.0)
    resumed = subprocess.run(
        [PY, "-m", "toolfold.cli", "resume", "s", "--store", store],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "c1.bg-1 (background): output of background command bg-1 of call c1" in resumed.stdout
    shown = subprocess.run(
        [PY, "-m", "toolfold.cli", "show", "s", "c1.bg-1", "--store", store, "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    message = json.loads(shown.stdout)
    assert message["kind"] == "background" and message["outcome"] == "interrupted"
    assert message["content"][0]["text"].startswith("first\n[The process that followed")
    assert "an exec host, which stops its commands" in message["details"]["interrupted"]
