"""``toolfold mcp proxy --upstream-url``: Streamable HTTP upstreams, driven by the SDK client.

Upstreams: the reference ``server-everything`` (event streams, LF lines) and
``http_upstream.py``, written with the official SDK (JSON bodies, or event streams
with CRLF lines).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_helpers import calls, free_port, http_upstream, proxy, session_on, text_of

SERVER = str(Path(__file__).with_name("http_upstream.py"))


async def test_a_streamable_http_upstream_through_upstream_url(
    tmp_path: Path, everything_server: Path
) -> None:
    port = free_port()
    # 2 MB: past the SDK client's own 1 MiB bound on an event, well under the cap.
    big = "y" * 2_000_000
    with http_upstream([str(everything_server), "streamableHttp"], port, tmp_path / "up.err") as (
        url,
        _,
    ):
        params = proxy(tmp_path, options=("--upstream-url", url))
        with anyio.fail_after(120):
            async with session_on(params, tmp_path / "proxy.err") as client:
                echo = await client.call_tool("echo", {"message": big})
                total = await client.call_tool("get-sum", {"a": 2, "b": 3})
    assert not echo.is_error, text_of(echo)
    assert len(text_of(echo).encode()) < 60 * 1024
    spill = Path(text_of(echo).split("Full output: ")[1].split("]")[0])
    assert spill.read_text() == f"Echo: {big}"
    assert "5" in text_of(total) and not total.is_error


async def test_an_event_over_the_cap_is_an_error_and_the_proxy_keeps_serving(
    tmp_path: Path, everything_server: Path
) -> None:
    port = free_port()
    with http_upstream([str(everything_server), "streamableHttp"], port, tmp_path / "up.err") as (
        url,
        _,
    ):
        params = proxy(tmp_path, options=("--upstream-url", url, "--max-message-bytes", "1000000"))
        with anyio.fail_after(120):
            async with session_on(params, tmp_path / "proxy.err") as client:
                under = await client.call_tool("echo", {"message": "u" * 900_000})
                over = await client.call_tool("echo", {"message": "o" * 3_000_000})
                after = await client.call_tool("get-sum", {"a": 2, "b": 3})
    assert not under.is_error, text_of(under)
    assert over.is_error
    message = text_of(over)
    assert "more than 1,000,000 bytes" in message and "--max-message-bytes" in message
    assert f"upstream {url}" in message
    assert not after.is_error and "5" in text_of(after)
    assert [c.status for c in await calls(tmp_path, "p1")] == ["ok", "error", "ok"]


@pytest.mark.parametrize("mode", ["json", "sse"])
async def test_json_bodies_and_crlf_event_streams_over_the_cap(tmp_path: Path, mode: str) -> None:
    port = free_port()
    with http_upstream([sys.executable, SERVER, mode], port, tmp_path / "up.err") as (url, _):
        params = proxy(tmp_path, options=("--upstream-url", url, "--max-message-bytes", "4000000"))
        with anyio.fail_after(120):
            async with session_on(params, tmp_path / "proxy.err") as client:
                under = await client.call_tool("blob", {"size": 1_500_000})
                over = await client.call_tool("blob", {"size": 5_000_000})
                after = await client.call_tool("blob", {"size": 10})
    assert not under.is_error, text_of(under)
    spill = Path(text_of(under).split("Full output: ")[1].split("]")[0])
    assert spill.read_text() == "z" * 1_500_000
    assert over.is_error and "more than 4,000,000 bytes" in text_of(over)
    assert not after.is_error and text_of(after).startswith("z" * 10)


async def test_an_http_upstream_that_dies_mid_call_is_an_error_and_the_next_call_reconnects(
    tmp_path: Path, everything_server: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    command = [str(everything_server), "streamableHttp"]
    started = anyio.Event()
    results: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    with anyio.fail_after(120):
        async with session_on(
            proxy(tmp_path, options=("--upstream-url", url)), tmp_path / "proxy.err"
        ) as client:
            with http_upstream(command, port, tmp_path / "up1.err") as (_, first):
                async with anyio.create_task_group() as group:

                    async def call() -> None:
                        results.append(
                            await client.call_tool(
                                "trigger-long-running-operation",
                                {"duration": 60, "steps": 60},
                                progress_callback=on_progress,
                            )
                        )

                    group.start_soon(call)
                    await started.wait()
                    os.killpg(first.pid, signal.SIGKILL)
            with http_upstream(command, port, tmp_path / "up2.err"):
                again = await client.call_tool("get-sum", {"a": 2, "b": 3})
    [dropped] = results
    assert dropped.is_error
    assert f"upstream {url} closed the connection during the call" in text_of(dropped)
    assert not again.is_error and "5" in text_of(again)
