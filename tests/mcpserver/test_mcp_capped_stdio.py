"""The proxy's capped stdio transport against a real child writing JSON-RPC lines."""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from toolfold.mcp._capped_stdio import Ledger, capped_stdio_client
from toolfold.mcp._message_cap import _EDGE, Framer, Oversized, Unmatched, _request_id, oversized

CAP = 10_000


def _response(request_id: int, text: str, *, id_last: bool) -> str:
    body = {"content": [{"type": "text", "text": text}]}
    data = (
        {"result": body, "jsonrpc": "2.0", "id": request_id}
        if id_last
        else {"jsonrpc": "2.0", "id": request_id, "result": body}
    )
    return json.dumps(data)


async def test_lines_over_the_cap_become_errors_for_their_request(tmp_path: Path) -> None:
    lines = [
        _response(1, "small", id_last=False),
        _response(2, "x" * 50_000, id_last=False),  # Python writers: id first
        _response(3, "y" * 50_000, id_last=True),  # JavaScript writers: id last
        "z" * 50_000,  # no id anywhere
        _response(4, "after", id_last=True),
    ]
    script = tmp_path / "lines.txt"
    script.write_text("\n".join(lines) + "\n")
    got: list[object] = []
    with open(tmp_path / "err", "w") as errlog, anyio.fail_after(30):
        async with capped_stdio_client(
            [sys.executable, "-c", f"import sys; sys.stdout.write(open({str(script)!r}).read())"],
            errlog=errlog,
            cap=CAP,
            who="upstream `test`",
        ) as (read_stream, _write_stream):
            async for item in read_stream:
                got.append(item)
    assert len(got) == 5
    first, second, third, fourth, fifth = got
    assert isinstance(first, object) and first.message.id == 1  # type: ignore[attr-defined]
    for item, request_id in ((second, 2), (third, 3)):
        message = item.message  # type: ignore[attr-defined]
        assert isinstance(message, types.JSONRPCError) and message.id == request_id
        assert "more than 10,000 bytes" in message.error.message
    assert isinstance(fourth, ValueError) and "more than 10,000 bytes" in str(fourth)
    assert fifth.message.id == 4  # type: ignore[attr-defined]


@given(request_id=st.one_of(st.integers(-(2**53), 2**53), st.text(max_size=20)))
def test_the_request_id_is_found_at_either_end(request_id: int | str) -> None:
    head = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"x": 1}}).encode()[:_EDGE]
    tail = json.dumps({"result": {"x": 1}, "jsonrpc": "2.0", "id": request_id}).encode()[-_EDGE:]
    assert _request_id(head, b"") == request_id
    assert _request_id(b"", tail) == request_id


def test_without_an_id_the_line_is_a_value_error() -> None:
    assert isinstance(oversized(b"[1,2", b"3]", 99, 10, "upstream"), ValueError)


def test_an_upstream_request_over_the_cap_answers_none_of_ours() -> None:
    # Its "id" is the upstream's own: taken for a response, it would fail our call 7.
    for data in (
        {"jsonrpc": "2.0", "id": 7, "method": "sampling/createMessage", "params": {"x": "y"}},
        {"method": "sampling/createMessage", "params": {"x": "y"}, "jsonrpc": "2.0", "id": 7},
    ):
        line = json.dumps(data).encode()
        assert isinstance(oversized(line[:_EDGE], line[-_EDGE:], 99, 10, "upstream"), ValueError)


@given(
    messages=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"x")), max_size=12),
    cap=st.integers(1, 50),
    cuts=st.lists(st.integers(0, 600), max_size=8),
    sep=st.sampled_from([b"\n", b"\n\n", b"\r\n"]),
)
def test_the_framer_splits_any_chunking_alike_and_holds_at_most_the_cap(
    messages: list[bytes], cap: int, cuts: list[int], sep: bytes
) -> None:
    messages = [m.replace(b"\r", b"x") for m in messages]
    stream = b"".join(m + sep for m in messages)
    framer = Framer(cap, sep)
    got: list[bytes | Oversized] = []
    bounds = [0, *sorted(c for c in cuts if c < len(stream)), len(stream)]
    for start, end in itertools.pairwise(bounds):
        got += framer.feed(stream[start:end])
        assert len(framer._message) <= cap  # never more than the cap held
    assert framer.leftover() is None
    want = [m if len(m) <= cap else len(m) for m in messages]
    assert [g.size if isinstance(g, Oversized) else g for g in got] == want
    for message, item in zip(messages, got, strict=True):
        if isinstance(item, Oversized):  # its ends are kept, to find the "id"
            assert message.startswith(item.head) and message.endswith(item.tail)


def _request(request_id: int) -> types.JSONRPCRequest:
    return types.JSONRPCRequest(jsonrpc="2.0", id=request_id, method="tools/call", params={})


@given(
    sent=st.lists(st.integers(1, 30), unique=True, max_size=10),
    answered=st.sets(st.integers(1, 30)),
    cancelled=st.sets(st.integers(1, 30)),
    reply=st.booleans(),
)
def test_an_unreadable_answer_fails_the_oldest_call_still_waiting(
    sent: list[int], answered: set[int], cancelled: set[int], reply: bool
) -> None:
    ledger = Ledger()
    for request_id in sent:
        ledger.sent(_request(request_id))
    for request_id in answered:
        error = types.ErrorData(code=-1, message="x")
        ledger.received(
            SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))
        )
    for request_id in cancelled:
        params = {"requestId": request_id}
        ledger.sent(
            types.JSONRPCNotification(
                jsonrpc="2.0", method="notifications/cancelled", params=params
            )
        )
    waiting = [i for i in sent if i not in answered and i not in cancelled]
    got = ledger.received(Unmatched("the upstream sent garbage", reply=reply))
    if reply and waiting:
        assert isinstance(got, SessionMessage)
        assert isinstance(got.message, types.JSONRPCError)
        assert (
            got.message.id == waiting[0]
            and got.message.error.message == "the upstream sent garbage"
        )
        assert list(ledger.ours.values()) == waiting[1:]
    else:  # the upstream's own request or a notification, or nothing waits: logged only
        assert isinstance(got, Unmatched)
        assert list(ledger.ours.values()) == waiting


async def test_concurrent_senders_write_whole_lines_in_turn(tmp_path: Path) -> None:
    # Written by each sender's own task: lines much bigger than the pipe's buffer, sent
    # at once, reach the upstream whole and never interleaved; the upstream (a child
    # that writes back every line it reads) answers each, and the ledger saw each sent.
    big = 300_000
    ids = range(1, 9)
    echo = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line); sys.stdout.flush()"
    got: list[object] = []
    with open(tmp_path / "err", "w") as errlog, anyio.fail_after(60):
        async with capped_stdio_client(
            [sys.executable, "-c", echo], errlog=errlog, cap=10 * big, who="upstream `echo`"
        ) as (read_stream, write_stream):
            # On asyncio the lines go to the StreamWriter under anyio's stream itself.
            assert isinstance(write_stream._writer, asyncio.StreamWriter)
            async with anyio.create_task_group() as group:
                for request_id in ids:
                    request = types.JSONRPCRequest(
                        jsonrpc="2.0",
                        id=request_id,
                        method="tools/call",
                        params={"name": "x", "arguments": {"pad": str(request_id) * big}},
                    )
                    group.start_soon(write_stream.send, SessionMessage(request))
                for _ in ids:
                    got.append(await read_stream.receive())
            await write_stream.aclose()
            with pytest.raises(anyio.ClosedResourceError):
                await write_stream.send(SessionMessage(_request(99)))
    seen = sorted(item.message.id for item in got)  # type: ignore[attr-defined]
    assert seen == list(ids)
    for item in got:
        message = item.message  # type: ignore[attr-defined]
        assert message.params["arguments"]["pad"] == str(message.id) * big


async def test_after_the_upstream_closed_its_stdin_sends_fail_and_the_read_side_ends(
    tmp_path: Path,
) -> None:
    # The upstream exits at once: the first write finds the pipe closed (that message
    # is dropped: the calls waiting learn of the end from the read side), later sends
    # are refused.
    with open(tmp_path / "err", "w") as errlog, anyio.fail_after(30):
        async with capped_stdio_client(
            [sys.executable, "-c", "import sys; sys.stdin.close()"],
            errlog=errlog,
            cap=CAP,
            who="upstream `gone`",
        ) as (read_stream, write_stream):
            with pytest.raises(anyio.EndOfStream):
                await read_stream.receive()
            await write_stream.send(SessionMessage(_request(1)))
            with pytest.raises(anyio.BrokenResourceError):
                for n in range(2, 100):  # the pipe's end is seen within a few writes
                    await write_stream.send(SessionMessage(_request(n)))
                    await anyio.sleep(0.01)
