"""The proxy's capped stdio transport against a real child writing JSON-RPC lines."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
from hypothesis import given
from hypothesis import strategies as st

from toolfold.mcp._capped_stdio import _EDGE, _request_id, capped_stdio_client, oversized

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
