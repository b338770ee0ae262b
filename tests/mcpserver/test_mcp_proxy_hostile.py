"""``toolfold mcp proxy`` in front of a hostile upstream (``hostile_upstream.py``): a bad
line is its call's error and the next call works; escapes never reach the client."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_helpers import calls, proxy, session_on, text_of

from toolfold.mcp._client_link import MAX_CLIENT_REQUESTS

HOSTILE = Path(__file__).with_name("hostile_upstream.py")


def hostile(tmp_path: Path, *options: str) -> StdioServerParameters:
    return proxy(tmp_path, sys.executable, str(HOSTILE), options=options)


@pytest.mark.parametrize(
    ("tool", "why"),
    [
        ("bad_utf8", "invalid unicode code point"),
        ("deep_structured", "recursion limit exceeded"),
        ("deep_meta", "recursion limit exceeded"),
        ("garbage", "expected ident at line 1 column 2"),
    ],
)
async def test_a_bad_upstream_line_is_that_calls_error_and_the_next_call_works(
    tmp_path: Path, tool: str, why: str
) -> None:
    # fail_after bounds a hang (the bug: the call never answered); it times nothing.
    with anyio.fail_after(60):
        async with session_on(hostile(tmp_path), tmp_path / "proxy.err") as client:
            bad = await client.call_tool(tool, {})
            after = await client.call_tool("echo", {"text": "still serving"})
    message = text_of(bad)
    assert bad.is_error, message
    assert f"upstream `{sys.executable} {HOSTILE}` sent a message that is not valid" in message
    assert why in message.lower()
    assert not after.is_error and text_of(after).startswith("still serving")
    assert [c.status for c in await calls(tmp_path, "p1")] == ["error", "ok"]


async def test_an_upstream_error_with_the_closed_connection_code_is_that_error(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with session_on(hostile(tmp_path), tmp_path / "proxy.err") as client:
            failed = await client.call_tool("error_32000", {})
            after = await client.call_tool("echo", {"text": "same upstream"})
    message = text_of(failed)
    assert failed.is_error
    assert "answered 'error_32000' with error -32000: the database is locked" in message
    assert "closed its stdout" not in message and "exited" not in message
    assert text_of(after).startswith("same upstream")


async def test_terminal_escapes_are_cleaned_and_the_spill_keeps_the_raw_bytes(
    tmp_path: Path,
) -> None:
    from hostile_upstream import ESCAPES

    with anyio.fail_after(60):
        async with session_on(
            hostile(tmp_path, "--max-lines", "3"), tmp_path / "proxy.err"
        ) as client:
            result = await client.call_tool("escapes", {})
    text = text_of(result)
    for bad in ("\x1b", "\x07", "\u202e", "\u202c", "52;c;", "evil.example", "owned title"):
        assert bad not in text, repr(text)
    assert text.startswith("before  clipboard\n cleared\n titled\n")
    spill = Path(text.split("Full output: ")[1].split("]")[0])
    assert spill.read_bytes() == ESCAPES.encode()


async def test_a_log_flood_reaches_the_client_bounded_with_a_count_of_what_was_dropped(
    tmp_path: Path,
) -> None:
    sent = 20_000
    flood: list[str] = []
    dropped = 0
    accounted = anyio.Event()

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        nonlocal dropped
        if params.logger == "flood":
            flood.append(str(params.data))
        elif params.logger == "toolfold":
            dropped += int(str(params.data).split(" notifications")[0].replace(",", ""))
        if len(flood) + dropped == sent:
            accounted.set()

    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with (
            stdio_client(hostile(tmp_path), errlog=errlog) as (r, w),
            ClientSession(r, w, logging_callback=on_log) as client,
        ):
            await client.initialize()
            done = await client.call_tool("flood", {"logs": sent})
            # Every message reaches the client or is counted in a note that does:
            # the count goes out once the outbox has drained.
            await accounted.wait()
    assert text_of(done) == "flooded"
    assert len(flood) + dropped == sent
    assert flood == sorted(flood, key=lambda line: int(line.split()[2]))  # in order


async def test_requests_to_the_client_in_flight_are_bounded_and_the_excess_is_an_error(
    tmp_path: Path,
) -> None:
    in_flight = 0
    most = 0
    refused: list[str] = []
    release = anyio.Event()

    async def held() -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await release.wait()  # every answer held until the upstream says one was refused
        in_flight -= 1

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        if params.logger == "hostile":
            refused.append(str(params.data))
            release.set()

    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        await held()
        text = types.TextContent(type="text", text="ok")
        return types.CreateMessageResult(role="assistant", content=text, model="m")

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        await held()
        return types.ElicitResult(action="decline")

    callbacks: dict[str, Any] = {
        "sampling_callback": sampling,
        "elicitation_callback": elicit,
        "logging_callback": on_log,
    }
    with anyio.fail_after(120), open(tmp_path / "proxy.err", "w") as errlog:
        async with (
            stdio_client(hostile(tmp_path), errlog=errlog) as (r, w),
            ClientSession(r, w, **callbacks) as client,
        ):
            await client.initialize()
            done = await client.call_tool("ask_client", {"sampling": 200, "elicitation": 200})
    assert most == MAX_CLIENT_REQUESTS
    assert refused == [
        f"the proxy already has {MAX_CLIENT_REQUESTS} requests to its client in flight; "
        "ask again once one is answered"
    ]
    asked, errors = text_of(done).split(", ")
    assert asked == "asked 400" and 0 < int(errors.split()[0]) <= 400 - MAX_CLIENT_REQUESTS


async def test_spill_is_decided_by_bytes_not_characters(tmp_path: Path) -> None:
    text = "é" * 600  # 600 characters, 1,200 bytes: over a 1,000-byte window
    with anyio.fail_after(60):
        async with session_on(
            hostile(tmp_path, "--max-bytes", "1000"), tmp_path / "proxy.err"
        ) as client:
            result = await client.call_tool("echo", {"text": text})
    shown = text_of(result)
    spill = Path(shown.split("Full output: ")[1].split("]")[0])
    assert spill.read_bytes() == text.encode()
    assert shown.startswith("é" * 500) and not shown.startswith("é" * 501)


async def test_an_embedded_resource_bigger_than_the_window_moves_to_a_spill_file(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(60):
        async with session_on(hostile(tmp_path), tmp_path / "proxy.err") as client:
            result = await client.call_tool("big_resource", {})
    assert not any(isinstance(b, types.EmbeddedResource) for b in result.content)
    note = text_of(result)
    moved = Path(note.split("block (")[1].split(" was saved to ")[1].split("]")[0])
    assert "[A resource block (200,0" in note
    saved = json.loads(moved.read_text())
    assert saved["resource"]["text"] == "r" * 200_000


async def test_the_upstream_command_needs_no_double_dash(tmp_path: Path) -> None:
    # `-u` is the upstream's option (python's), after the first word that is not
    # one of the proxy's: clients such as the MCP Inspector drop a `--`.
    params = proxy(tmp_path)
    params = params.model_copy(
        update={"args": [*params.args, "--max-lines", "5", sys.executable, "-u", str(HOSTILE)]}
    )
    with anyio.fail_after(60):
        async with session_on(params, tmp_path / "proxy.err") as client:
            result = await client.call_tool("echo", {"text": "x\n" * 10})
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("x\nx\nx\nx\nx\n[Showing the first 5 of 10 lines")


async def test_a_head_window_cut_inside_a_line_reads_on_from_that_line(tmp_path: Path) -> None:
    lines = [f"{n:040d}" for n in range(1, 2401)]  # 41 bytes a line: 51,200 ends in line 1,249
    with anyio.fail_after(60):
        async with session_on(hostile(tmp_path), tmp_path / "proxy.err") as client:
            result = await client.call_tool("echo", {"text": "\n".join(lines) + "\n"})
            record = (result.meta or {})["toolfold"]
            hint = text_of(result).rpartition("[To see the rest, call toolfold_read with ")[2]
            path = json.loads(hint.split("path=")[1].split(" and offset=")[0])
            offset = int(hint.split("offset=")[1].split(";")[0])
            rest = await client.call_tool("toolfold_read", {"path": path, "offset": offset})
    assert record["truncation"]["last_line_partial"] is True
    assert record["truncation"]["output_lines"] == 1249 and offset == 1249
    assert text_of(result).split("\n")[1248] == lines[1248][: 51_200 - 1248 * 41]
    assert text_of(rest).startswith(lines[1248] + "\n" + lines[1249] + "\n")
