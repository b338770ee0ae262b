"""The built-in tools against a remote file system give what they give locally.

Each test runs twice: through the command-prefix transport (the container stand-in)
and through a real sshd on loopback.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sshd_fixture import SSHServer, local_transport
from toolfold.execenv import LocalExecEnv, RemoteExecEnv
from toolfold.harness import EventBus, ToolContext, ToolResult, execute_tool_call
from toolfold.tools import BASH, GREP, PYTEST, READ


@pytest.fixture(params=["prefix", "ssh"])
async def remote(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[RemoteExecEnv]:
    if request.param == "ssh":
        server: SSHServer = request.getfixturevalue("sshd_server")
        transport = server.transport()
    else:
        transport = local_transport()
    env = RemoteExecEnv(transport, spill_dir=str(tmp_path / "remote-spill"))
    try:
        yield env
    finally:
        await env.aclose()


async def call(tool: Any, args: dict[str, Any], env: Any, cwd: Path) -> ToolResult:
    context = ToolContext(env=env, cwd=cwd)
    return await execute_tool_call(
        tool, "c1", args, run_id="r", turn_id="t", bus=EventBus(), context=context
    )


async def both(tool: Any, args: dict[str, Any], remote: RemoteExecEnv, cwd: Path) -> ToolResult:
    """Run locally and remotely; the model-visible result and the state must agree."""
    here = await call(tool, args, LocalExecEnv(cwd / "local-spill"), cwd)
    there = await call(tool, args, remote, cwd)
    assert there.text == here.text
    assert there.is_error == here.is_error
    assert there.content == here.content
    assert there.details == here.details
    if here.state is not None and there.state is not None:
        assert there.state["truncation"] == here.state["truncation"]
    return there


async def test_read_and_grep_match_local(remote: RemoteExecEnv, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    (tmp_path / "big.txt").write_bytes(b"".join(b"r%06d \xff\n" % i for i in range(30_000)))
    (tmp_path / "wide.txt").write_text("x" * 200_000)
    (tmp_path / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    for args in (
        {"path": "f.txt", "offset": 3, "limit": 2},
        {"path": "f.txt"},
        {"path": "big.txt"},
        {"path": "big.txt", "offset": 101},
        {"path": "big.txt", "offset": 30_001},
        {"path": "wide.txt"},
        {"path": "pic.png"},
        {"path": "missing.txt"},
        {"path": "."},
    ):
        await both(READ, args, remote, tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("import os\nTODO: fix\nx = 1\n")
    (tmp_path / "src" / "b.txt").write_text("todo later\n" * 5000)
    (tmp_path / "src" / "bin.dat").write_bytes(b"TODO\0\0")
    for args in (
        {"pattern": "todo", "ignore_case": True},
        {"pattern": "TODO", "glob": "*.py"},
        {"pattern": "nothing-matches-this"},
        {"pattern": "("},
        {"pattern": "x", "path": "no-such-dir"},
    ):
        await both(GREP, args, remote, tmp_path)


async def test_read_pages_through_a_remote_spill_file(
    remote: RemoteExecEnv, tmp_path: Path
) -> None:
    ran = await call(BASH, {"command": "seq 1 100000"}, remote, tmp_path)
    found = re.search(r"Full output: (\S+)\]", ran.text)
    assert found is not None, ran.text
    spill = found.group(1)
    assert spill.startswith(str(tmp_path / "remote-spill"))  # a file on the exec host
    assert ran.text.startswith("98001\n")
    page = await call(READ, {"path": spill, "offset": 5000, "limit": 3}, remote, tmp_path)
    assert page.text == (
        "5000\n5001\n5002\n[Showing lines 5,000-5,002. More lines follow; use offset=5003 to continue.]"
    )


async def test_pytest_runs_remotely_with_summary_details(
    remote: RemoteExecEnv, tmp_path: Path
) -> None:
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n\n"
        "def test_one():\n    assert True\n\n"
        "def test_two():\n    assert 1 == 2, 'two is not one'\n\n"
        "@pytest.mark.skip(reason='later')\ndef test_three():\n    pass\n"
    )
    result = await call(PYTEST, {"path": "test_sample.py"}, remote, tmp_path)
    assert result.is_error
    assert result.text.endswith("pytest exited with code 1: 1 passed, 1 failed, 1 skipped of 3")
    assert result.details["failures"][0]["name"] == "test_sample.py::test_two"
    assert "two is not one" in result.details["failures"][0]["message"]
    (tmp_path / "test_sample.py").write_text("def test_ok():\n    pass\n")
    ok = await call(PYTEST, {"path": "test_sample.py"}, remote, tmp_path)
    assert not ok.is_error and ok.details["passed"] == 1 and ok.details["total"] == 1


async def test_remote_reads_are_bounded_and_cut_as_local_ones(
    remote: RemoteExecEnv, tmp_path: Path
) -> None:
    (tmp_path / "wide.txt").write_text("é€x" * 40_000 + "\nnext\n")
    first = await both(READ, {"path": "wide.txt"}, remote, tmp_path)
    assert first.text.endswith("Use offset=1, line_byte=51200 to continue.]")
    await both(READ, {"path": "wide.txt", "line_byte": 51_200}, remote, tmp_path)
    await both(GREP, {"pattern": "x$", "path": "wide.txt"}, remote, tmp_path)
    for path, kind in (("/dev/zero", "a character device"), ("/proc/self/status", None)):
        got = await call(READ, {"path": path}, remote, tmp_path)
        if kind is None:
            assert not got.is_error and got.text.startswith("Name:\t")
        else:
            assert got.is_error and f"{path} is {kind}, not a regular file" in got.text
    past = await call(READ, {"path": "wide.txt", "line_byte": 10**9}, remote, tmp_path)
    assert past.is_error
    assert "line_byte 1000000000 is past the end of line 1, which has 240,000 bytes" in past.text
