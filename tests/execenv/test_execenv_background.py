"""Commands that outlive their call: yield, reads of new output, stdin, signals, limits.

Real processes throughout. Synchronisation is on the output itself (``until``) or on a
command's end, never on sleeps; every test checks that nothing it started is left.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import os
import re
import sys
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sandbox_escapes import PID_RECORD, record_pid
from toolfold.execenv import (
    BackgroundLimitError,
    CaptureOptions,
    ExecConfigError,
    HandleError,
    LocalExecEnv,
    Replace,
    Sandbox,
    ShellOutputLimits,
    ShellOutputUpdate,
    apply_shell_output_update,
)
from toolfold.execenv._ledger import read_ledger

BOUND = 60.0
PY = sys.executable


def gone(pid: int) -> bool:
    """Dead and reaped: no /proc entry (a zombie would still have one)."""
    return not Path(f"/proc/{pid}").exists()


def namespace_gone(namespace: str) -> bool:
    """No process is left in pid namespace ``namespace`` (``pid:[N]``), not even a zombie."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") == namespace:
                    return False
            except OSError:
                continue
    return True


def group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def marked_processes(exec_marker: str) -> list[int]:
    """Processes below this one still carrying a command's marker."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if exec_marker.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


async def output_until(env: LocalExecEnv, started_text: str, handle: str, until: str) -> str:
    """The output from the start until ``until`` has appeared (``until`` waits for new
    output only: it may have come within the yield already)."""
    text = started_text
    while until not in text:
        read = await env.background.read(handle, wait=BOUND, until=until)
        assert read.running, f"ended before printing {until!r}: {text + read.text!r}"
        text += read.text
    return text


@pytest.fixture
async def env(tmp_path: Path, sandbox: Sandbox | None) -> AsyncIterator[LocalExecEnv]:
    local = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2, sandbox=sandbox)
    yield local
    await local.aclose()


@pytest.fixture
async def host_env(tmp_path: Path) -> AsyncIterator[LocalExecEnv]:
    local = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)
    yield local
    await local.aclose()


@pytest.fixture
async def sandboxed(tmp_path: Path) -> AsyncIterator[LocalExecEnv]:
    box = Sandbox("workspace-write", writable=(str(tmp_path),))
    local = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2, sandbox=box)
    yield local
    await local.aclose()


async def test_in_a_sandbox_a_signal_reaches_the_command_not_bwrap(
    sandboxed: LocalExecEnv,
) -> None:
    started = await asyncio.wait_for(
        sandboxed.exec(
            "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.1; done",
            yield_after=0.1,
        ),
        BOUND,
    )
    assert started.handle is not None
    await output_until(sandboxed, started.text, started.handle, "ready\n")
    [info] = sandboxed.background.commands()
    ended = await sandboxed.background.signal(started.handle, "INT", wait=BOUND)
    assert ended.text == "got-int\n" and ended.exit_code == 7
    assert gone(info.pid)


async def test_in_a_sandbox_a_repl_gets_its_terminal(sandboxed: LocalExecEnv) -> None:
    started = await asyncio.wait_for(
        sandboxed.exec(f"{PY} -q -i", yield_after=0.2, tty=True), BOUND
    )
    assert started.handle is not None
    await output_until(sandboxed, started.text, started.handle, ">>> ")
    answer = await sandboxed.background.write(
        started.handle, "import os; print(6 * 7, os.isatty(0))\n", wait=BOUND, until="42 True"
    )
    assert "42 True\n" in answer.text
    closed = await sandboxed.aclose()
    assert [c.ended for c in closed] == ["closed"]


async def test_a_command_that_ends_within_the_yield_returns_as_today(env: LocalExecEnv) -> None:
    result = await asyncio.wait_for(env.exec("echo one; exit 3", yield_after=30), BOUND)
    assert result.handle is None
    assert result.exit_code == 3
    assert result.text == "one\n"
    assert env.background.commands() == []
    assert env.background.running == 0


# Unconfined only: each sandboxed command has a loopback of its own, so the second call
# cannot reach the server (and a stopped command reports 128+N there, not None).
async def test_a_dev_server_started_queried_read_and_stopped(host_env: LocalExecEnv) -> None:
    env = host_env
    started = await asyncio.wait_for(
        env.exec(f"exec {PY} -u -m http.server --bind 127.0.0.1 0", yield_after=0.2), BOUND
    )
    handle = started.handle
    assert handle is not None and started.exit_code is None
    [info] = env.background.commands()
    assert info.running and info.handle == handle
    seen = await output_until(env, started.text, handle, "Serving HTTP")
    first = await env.background.read(handle)
    port = int(re.search(r"port (\d+)", seen).group(1))  # type: ignore[union-attr]
    # Another call asks for a page, as an agent would.
    fetch = await asyncio.wait_for(
        env.exec(
            f'{PY} -c "import urllib.request as u; '
            f"print(u.urlopen('http://127.0.0.1:{port}/').status)\""
        ),
        BOUND,
    )
    assert fetch.exit_code == 0 and fetch.text == "200\n"
    # The server logged that request before answering it: the read sees it at once.
    log = await env.background.read(handle)
    assert '"GET / HTTP/1.1" 200' in log.text
    assert log.running and log.offset == first.offset + first.truncation.total_bytes
    assert log.total_bytes == log.offset + log.truncation.total_bytes
    # Nothing new since: an empty read with the same totals.
    again = await env.background.read(handle)
    assert again.text == "" and again.truncation.total_bytes == 0
    assert again.total_bytes == log.total_bytes
    stopped = await env.background.stop(handle)
    assert not stopped.running and stopped.ended == "stopped" and stopped.exit_code is None
    assert gone(info.pid) and group_gone(info.pid)
    assert env.background.commands() == []
    assert env.background.running == 0
    with pytest.raises(HandleError, match=f"no background command '{handle}'"):
        await env.background.read(handle)


async def test_a_prompt_answered_through_stdin(env: LocalExecEnv) -> None:
    script = "a = input('Proceed? [y/N] '); print('answer:', a)"
    started = await asyncio.wait_for(env.exec(f'{PY} -c "{script}"', yield_after=0.2), BOUND)
    assert started.handle is not None
    prompt = await output_until(env, started.text, started.handle, "Proceed?")
    assert prompt == "Proceed? [y/N] "
    answered = await env.background.write(started.handle, "y\n", wait=BOUND)
    assert answered.written == 2
    assert answered.text == "answer: y\n"
    assert not answered.running and answered.ended == "exited" and answered.exit_code == 0
    assert env.background.commands() == []


async def test_eof_closes_stdin(env: LocalExecEnv) -> None:
    started = await asyncio.wait_for(env.exec("echo ready; wc -c", yield_after=0.2), BOUND)
    assert started.handle is not None
    done = await env.background.write(started.handle, "12345", eof=True, wait=BOUND)
    assert not done.running and done.exit_code == 0
    assert done.text.split()[-1] == "5"


async def test_a_repl_on_a_pseudo_terminal(env: LocalExecEnv) -> None:
    started = await asyncio.wait_for(
        env.exec(f"{PY} -q -i", yield_after=0.2, tty=True, env={**os.environ, "TERM": "xterm"}),
        BOUND,
    )
    handle = started.handle
    assert handle is not None
    await output_until(env, started.text, handle, ">>> ")
    answer = await env.background.write(
        handle,
        "import os, sys; print(6 * 7, os.isatty(0), sys.stdout.isatty())\n",
        wait=BOUND,
        until="42 True True",
    )
    assert "42 True True\n" in answer.text
    assert "\x1b" not in answer.text  # escape sequences are cleaned for the view
    size = await env.background.write(
        handle, "print(os.get_terminal_size())\n", wait=BOUND, until="lines="
    )
    assert "columns=120, lines=40" in size.text
    env.background.resize(handle, 100, 30)
    resized = await env.background.write(
        handle, "print(os.get_terminal_size())\n", wait=BOUND, until="lines="
    )
    assert "columns=100, lines=30" in resized.text
    [info] = env.background.commands()
    assert info.tty
    ended = await env.background.write(handle, "", eof=True, wait=BOUND)
    assert not ended.running and ended.exit_code == 0
    assert gone(info.pid)


async def test_read_p_and_a_progress_bar_on_a_terminal(env: LocalExecEnv, tmp_path: Path) -> None:
    command = (
        "test -t 1 && echo on-a-tty; "
        "printf '10%%\\r50%%\\r\\033[32m100%%\\033[0m\\n'; "
        "read -p 'Name? ' n; echo \"hello $n\""
    )
    started = await asyncio.wait_for(env.exec(command, yield_after=0.2, tty=True), BOUND)
    assert started.handle is not None
    shown = await output_until(env, started.text, started.handle, "Name? ")
    assert "on-a-tty\n" in shown
    assert "100%\n" in shown and "10%" not in shown.replace("100%", "")
    done = await env.background.write(started.handle, "ada\n", wait=BOUND)
    assert "hello ada" in done.text and done.exit_code == 0


async def test_nothing_is_lost_between_reads_and_the_spill_is_exact(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2, sandbox=sandbox)
    limits = ShellOutputLimits(max_bytes=4096, max_lines=100)
    # A deterministic writer: numbered lines, flushed in bursts, until told to stop.
    script = (
        "import sys\n"
        "for i in range(200000):\n"
        "    sys.stdout.write(f'line {i:07d} ' + 'x' * (i % 50) + '\\n')\n"
        "    if i % 1000 == 0: sys.stdout.flush()\n"
    )
    (tmp_path / "gen.py").write_text(script)
    expected = b"".join(f"line {i:07d} {'x' * (i % 50)}\n".encode() for i in range(200000))
    # It waits for a line on stdin first, so it is surely still running at the yield.
    started = await asyncio.wait_for(
        env.exec(
            f"read -r go; exec {PY} {tmp_path / 'gen.py'}",
            yield_after=0.01,
            capture=CaptureOptions(limits=limits),
        ),
        BOUND,
    )
    assert started.handle is not None and started.text == ""
    # A write returns a read too: what came since is in it.
    reads = [await env.background.write(started.handle, "go\n", wait=0)]
    while reads[-1].running:
        reads.append(await env.background.read(started.handle, wait=BOUND))
    assert reads[0].offset == 0
    for a, b in itertools.pairwise(reads):
        assert b.offset == a.offset + a.truncation.total_bytes
    last = reads[-1]
    assert last.offset + last.truncation.total_bytes == len(expected) == last.total_bytes
    assert last.exit_code == 0 and last.ended == "exited"
    # Each read is the tail of exactly its bytes.
    for read in reads:
        part = expected[read.offset : read.offset + read.truncation.total_bytes]
        assert part.decode().endswith(read.text)
        assert read.truncation.total_lines == part.count(b"\n")
    assert last.spill_path is not None
    assert Path(last.spill_path).read_bytes() == expected
    await env.aclose()


async def test_a_gigabyte_in_the_background_stays_bounded_and_spills_exactly(
    tmp_path: Path,
    sandbox: Sandbox | None,
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2, sandbox=sandbox)
    size = 1_000_000_000
    command = f"read -r go; yes 'toolfold background line' | head -c {size}"
    want = hashlib.sha256()
    chunk = b"toolfold background line\n" * 40000
    left = size
    while left:
        want.update(chunk[:left])
        left -= min(left, len(chunk))
    folded = None

    def on_update(update: ShellOutputUpdate) -> None:
        nonlocal folded
        folded = apply_shell_output_update(folded, update)

    tracemalloc.start()
    try:
        started = await asyncio.wait_for(env.exec(command, yield_after=0.05), BOUND)
        assert started.handle is not None
        follower = asyncio.create_task(env.background.follow(started.handle)(on_update))
        # A write returns a read too: what came since is in it.
        read = await env.background.write(started.handle, "go\n", wait=0)
        total = read.truncation.total_bytes
        tracemalloc.reset_peak()
        while read.running:
            read = await env.background.read(started.handle, wait=BOUND)
            total += read.truncation.total_bytes
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert read.exit_code == 0
    ended = await asyncio.wait_for(follower, BOUND)
    assert (ended.ended, ended.exit_code, ended.running) == ("exited", 0, False)
    assert started.truncation.total_bytes + total == size == read.total_bytes
    assert peak < 64 << 20, f"peak traced memory {peak} bytes while 1 GB streamed"
    assert read.spill_path is not None
    got = hashlib.sha256()
    with open(read.spill_path, "rb") as f:
        while block := f.read(1 << 20):
            got.update(block)
    assert got.hexdigest() == want.hexdigest()
    # The subscriber's fold ends on the command's final view.
    assert folded is not None and folded.metadata.truncation.total_bytes == size
    await env.aclose()


async def test_the_limits_each_answer_with_one_clear_error(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, max_background=1, sandbox=sandbox)
    first = await asyncio.wait_for(env.exec("exec sleep 1000", yield_after=0.1), BOUND)
    assert first.handle is not None
    with pytest.raises(BackgroundLimitError) as refused:
        await env.exec("echo never", yield_after=0.1)
    assert str(refused.value) == (
        "1 commands are already running in this environment (the limit is 1; background: "
        f"{first.handle} ('exec sleep 1000')); stop one with its handle before starting another"
    )
    # A plain exec (no yield) is not a background command and still runs.
    assert (await env.exec("echo plain")).text == "plain\n"
    with pytest.raises(ExecConfigError, match="one write sends at most 65536 bytes"):
        await env.background.write(first.handle, "x" * 70000)
    with pytest.raises(ExecConfigError, match="signal 'BOOM' is not one of INT, TERM"):
        await env.background.signal(first.handle, "BOOM")
    with pytest.raises(HandleError, match="no background command 'bg-99'"):
        await env.background.read("bg-99")
    await env.background.stop(first.handle)
    again = await asyncio.wait_for(env.exec("exec sleep 1000", yield_after=0.1), BOUND)
    assert again.handle is not None
    closed = await env.aclose()
    assert [(c.handle, c.ended) for c in closed] == [(again.handle, "closed")]
    with pytest.raises(HandleError, match="is closed"):
        await env.exec("echo late", yield_after=0.1)


async def test_the_registry_of_an_env_no_command_yielded_in(tmp_path: Path) -> None:
    """The background limits are checked when the env is made, although its registry
    is made on first use; closed before any command yielded, it refuses one as well."""
    with pytest.raises(ExecConfigError, match="max_running must be an int >= 1"):
        LocalExecEnv(tmp_path / "spill", max_background=0)
    with pytest.raises(ExecConfigError, match="idle_timeout must be a number of seconds > 0"):
        LocalExecEnv(tmp_path / "spill", idle_timeout=0)
    env = LocalExecEnv(tmp_path / "spill", max_background=3, idle_timeout=5)
    assert (await env.exec("echo plain")).text == "plain\n"
    assert await env.aclose() == []
    assert (env.background.max_running, env.background.idle_timeout) == (3, 5.0)
    assert env.background.commands() == []
    with pytest.raises(HandleError, match="is closed"):
        await env.exec("echo late", yield_after=0.1)


async def test_an_idle_command_is_stopped(tmp_path: Path, sandbox: Sandbox | None) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, idle_timeout=0.2, sandbox=sandbox)
    started = await asyncio.wait_for(env.exec("exec sleep 1000", yield_after=0.1), BOUND)
    assert started.handle is not None
    [info] = env.background.commands()
    await asyncio.wait_for(env.background.wait_ended(started.handle), BOUND)
    read = await env.background.read(started.handle)
    assert read.ended == "idle" and not read.running
    assert gone(info.pid)


async def test_the_timeout_still_applies_in_the_background(env: LocalExecEnv) -> None:
    started = await asyncio.wait_for(
        env.exec("echo up; exec sleep 1000", yield_after=0.1, timeout=0.5), BOUND
    )
    assert started.handle is not None
    [info] = env.background.commands()
    await asyncio.wait_for(env.background.wait_ended(started.handle), BOUND)
    read = await env.background.read(started.handle)
    assert read.ended == "timeout" and read.exit_code is None
    assert gone(info.pid)


async def test_a_signal_reaches_the_command(env: LocalExecEnv) -> None:
    script = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda *a: print('usr1', flush=True))\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(1)\n"
    )
    started = await asyncio.wait_for(env.exec(f'exec {PY} -c "{script}"', yield_after=0.1), BOUND)
    assert started.handle is not None
    # The whole line: a signal between "ready" and its newline would print between them.
    await output_until(env, started.text, started.handle, "ready\n")
    got = await env.background.signal(started.handle, "USR1", wait=BOUND, until="usr1\n")
    assert (got.text, got.running) == ("usr1\n", True), got
    ended = await env.background.signal(started.handle, "SIGINT", wait=BOUND)
    assert not ended.running and ended.ended in ("exited", "signal")
    assert "KeyboardInterrupt" in ended.text
    with pytest.raises(HandleError):
        await env.background.signal(started.handle, "INT")


async def test_cancel_within_the_yield_kills_it_and_nothing_is_left(
    env: LocalExecEnv,
) -> None:
    cancel = asyncio.Event()

    def on_update(update: ShellOutputUpdate) -> None:
        cancel.set()

    result = await asyncio.wait_for(
        env.exec(
            f"echo $$ {PID_RECORD}; setsid sleep 1000 & exec sleep 1000",
            yield_after=BOUND,
            cancel=cancel,
            on_update=on_update,
        ),
        BOUND,
    )
    assert result.cancelled and result.handle is None
    pid, namespace = result.text.split()[:2]
    assert namespace.startswith("pid:["), result.text
    if env.sandbox is None:
        assert gone(int(pid)) and group_gone(int(pid))
    else:  # $$ is the sandbox's own pid: nothing at all is left in its namespace
        assert namespace_gone(namespace)
    assert env.background.running == 0


async def test_task_cancellation_of_a_waiting_read_leaves_the_command_running(
    env: LocalExecEnv,
) -> None:
    started = await asyncio.wait_for(env.exec("exec sleep 1000", yield_after=0.1), BOUND)
    assert started.handle is not None
    waiting = asyncio.ensure_future(env.background.read(started.handle, wait=BOUND, until="x"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    [info] = env.background.commands()
    assert info.running


async def test_closing_the_environment_stops_escaped_processes_too(
    tmp_path: Path, sandbox: Sandbox | None
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2, sandbox=sandbox)
    started = await asyncio.wait_for(
        env.exec(
            f"setsid sh -c 'echo $$ {PID_RECORD}; exec sleep 1000' & echo $$ {PID_RECORD}; wait",
            yield_after=0.1,
        ),
        BOUND,
    )
    assert started.handle is not None
    text = started.text
    while len(text.splitlines()) < 2:
        text += (await env.background.read(started.handle, wait=BOUND, until="\n")).text
    records = text.splitlines()
    first = record_pid(records[0])  # the host's pid (inside a sandbox too)
    assert first is not None and all(record_pid(r) is not None for r in records)
    marker = f"TOOLFOLD_EXEC_ID={_exec_id_of(first)}"
    closed = await env.aclose()
    assert [c.ended for c in closed] == ["closed"]
    assert all(record_pid(r) is None for r in records)
    assert marked_processes(marker) == []


def _exec_id_of(pid: int) -> str:
    with open(f"/proc/{pid}/environ", "rb") as f:
        for item in f.read().split(b"\0"):
            if item.startswith(b"TOOLFOLD_EXEC_ID="):
                return item.split(b"=", 1)[1].decode()
    raise AssertionError(f"process {pid} has no marker")


async def test_follow_holds_the_command_from_the_call_on_and_tags_its_ledger_entry(
    tmp_path: Path,
) -> None:
    env = LocalExecEnv(tmp_path / "spill", kill_grace=0.5, exit_grace=0.2)
    started = await asyncio.wait_for(
        env.exec("echo one; read -r go; echo two", yield_after=0.1), BOUND
    )
    assert started.handle is not None
    follow = env.background.follow(started.handle, tag="call-1.bg-1")
    [entry] = read_ledger(tmp_path / "spill")
    assert entry["tag"] == "call-1.bg-1"
    # It ends, and the read that reports its end forgets the handle, before anyone
    # listens: the follower still gets its final view, once, and how it ended.
    read = await env.background.write(started.handle, "\n", wait=BOUND, until="two")
    while read.running:
        read = await env.background.read(started.handle, wait=BOUND)
    assert env.background.commands() == []
    got: list[ShellOutputUpdate] = []
    end = await asyncio.wait_for(follow(got.append), BOUND)
    assert (end.ended, end.exit_code) == ("exited", 0)
    [update] = got
    assert isinstance(update, Replace) and update.output.text == "one\ntwo\n"
    with pytest.raises(HandleError):
        env.background.follow(started.handle)
    with pytest.raises(ExecConfigError):
        env.background.follow("bg-1", tag="")
    await env.aclose()
