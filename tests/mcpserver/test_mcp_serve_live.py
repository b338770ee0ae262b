"""An MCP server's calls show up live in ``toolfold serve``: lane S follows session S."""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp_helpers import TOOLFOLD, clean_env, connect, poll, store_url, text_of

from toolfold.chord import Decoder, apply

TOKEN = secrets.token_urlsafe(32)
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _call(value: Any) -> Any:
    tools = (value or {}).get("tools") or {}
    return next(iter(tools.values()), None)


def _text(value: Any) -> str:
    call = _call(value)
    return str(call["output"]["content"][0]["text"]) if call and call["output"] else ""


async def test_an_mcp_call_shows_up_live_in_serve_and_settles_there(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = subprocess.Popen(
        [*TOOLFOLD, "serve", "--port", str(port), "--store", store_url(tmp_path), "--token", TOKEN],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    gate = tmp_path / "gate"
    command = f"echo first-line; while [ ! -e {gate} ]; do sleep 0.05; done; echo last-line"

    def answering() -> bool:
        assert serve.poll() is None
        try:
            return httpx.get(f"{base}/v1/sessions", headers=AUTH, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        poll(answering, "toolfold serve to answer")
        async with connect(tmp_path, session="live") as client, anyio.create_task_group() as group:
            results: list[Any] = []

            async def call() -> None:
                results.append(await client.call_tool("bash", {"command": command}))

            group.start_soon(call)
            for _ in range(600):  # the session exists once the call is recorded
                body = httpx.get(f"{base}/v1/sessions", headers=AUTH, timeout=5).json()
                if "live" in body["sessions"]:
                    break
                await anyio.sleep(0.05)
            decoder, value = Decoder(), None
            seen_running = False
            with anyio.fail_after(120):
                async with (
                    httpx.AsyncClient(base_url=base, headers=AUTH) as http,
                    http.stream("GET", "/v1/lanes/live/state", timeout=60) as response,
                ):
                    assert response.status_code == 200
                    async for line in response.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        value = apply(value, decoder.decode(json.loads(line[6:])))
                        call_view = _call(value)
                        if (
                            call_view
                            and call_view["status"] == "running"
                            and "first-line" in _text(value)
                        ):
                            seen_running = True
                            gate.touch()
                        if value["transcript"] and call_view and call_view["status"] != "running":
                            break
        assert seen_running
        assert _call(value)["status"] == "ok"
        assert _text(value) == "first-line\nlast-line\n"
        assert text_of(results[0]) == "first-line\nlast-line\n"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()


async def test_an_mcp_call_marks_its_session_active_for_the_landing_page(tmp_path: Path) -> None:
    # The viewer's landing page orders sessions by their spill directory's time, which a
    # call's start sets: a session recorded by `toolfold mcp` sorts by its last call too.
    async with connect(tmp_path) as client:
        spill = tmp_path / "store" / "spill" / "s1"
        os.utime(spill, (0, 0))  # as if the session had been idle since 1970
        result = await client.call_tool("bash", {"command": "echo hi"})
        assert text_of(result).startswith("hi"), text_of(result)
        assert spill.stat().st_mtime > 0


def _background(value: Any) -> tuple[str, Any] | None:
    tools = (value or {}).get("tools") or {}
    return next(((k, v) for k, v in tools.items() if v["tool_name"] == "background"), None)


def _output_text(call: Any) -> str:
    output = call["output"] if call else None
    return "".join(b["text"] for b in output["content"] if b["type"] == "text") if output else ""


async def test_a_dev_servers_log_reaches_a_serve_subscriber_after_its_call_settled(
    tmp_path: Path,
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = subprocess.Popen(
        [*TOOLFOLD, "serve", "--port", str(port), "--store", store_url(tmp_path), "--token", TOKEN],
        cwd=tmp_path,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def answering() -> bool:
        assert serve.poll() is None
        try:
            return httpx.get(f"{base}/v1/sessions", headers=AUTH, timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        poll(answering, "toolfold serve to answer")
        async with connect(tmp_path, "--sandbox", "off", session="dev") as client:
            started = await client.call_tool(
                "bash",
                {"command": "exec python3 -u -m http.server --bind 127.0.0.1 0", "yield_after": 1},
            )
            # The call that started it has settled: only a handle came back.
            handle = started.structured_content["details"]["handle"]  # type: ignore[index]
            decoder, value = Decoder(), None
            fetched = stopped = False
            with anyio.fail_after(120):
                async with (
                    httpx.AsyncClient(base_url=base, headers=AUTH) as http,
                    http.stream("GET", "/v1/lanes/dev/state", timeout=60) as response,
                ):
                    assert response.status_code == 200
                    async for line in response.aiter_lines():
                        if not line.startswith("data: "):
                            continue
                        value = apply(value, decoder.decode(json.loads(line[6:])))
                        found = _background(value)
                        if found is None:
                            continue
                        call_id, call = found
                        text = _output_text(call)
                        if not fetched and (m := re.search(r"port (\d+)", text)):
                            # A page requested by another call; its log line is the server's.
                            url = f"http://127.0.0.1:{m.group(1)}/"
                            fetch = f"python3 -c \"import urllib.request as u; u.urlopen('{url}')\""
                            assert not (await client.call_tool("bash", {"command": fetch})).is_error
                            fetched = True
                        if (
                            fetched
                            and not stopped
                            and '"GET / HTTP/1.1" 200' in text
                            and call["status"] == "running"
                        ):
                            # Seen live, while the server runs, by a subscriber of serve.
                            assert call_id.endswith(f".{handle}")
                            assert call["args"]["handle"] == handle
                            await client.call_tool("bash_stop", {"handle": handle})
                            stopped = True
                        if stopped and call["status"] != "running":
                            break
        assert stopped
        assert call["status"] == "ok"
        assert _output_text(call).endswith(f"[{handle} was stopped]")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(serve.pid, signal.SIGKILL)
        serve.wait()
