"""The proxy's cap on one upstream message (``mcp._message_cap``), called directly: the
framer holds at most the cap of any message whatever the chunking, and a dropped
message's error finds the request it answered.

These run in microseconds, so they are what a mutation run of the module checks against
(docs/TESTING.md); tests/mcpserver/test_mcp_capped_stdio.py checks the same cap through
a real upstream process."""

from __future__ import annotations

import itertools

import mcp_types as types
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from toolfold.mcp._message_cap import Framer, Oversized, Unmatched, oversized, rejected, too_large

EDGE = 512
MESSAGES = st.lists(
    st.binary(max_size=1200).map(lambda b: b.replace(b"\n", b"x").replace(b"\r", b"y")), max_size=5
)


@given(
    MESSAGES,
    st.sampled_from([b"\n", b"\r\n", b"\n\n"]),
    st.integers(0, 1300),
    st.lists(st.integers(0, 7000), max_size=8),
    st.booleans(),
)
@example([bytes(range(97, 123)) * 31], b"\n", 700, [600], True)  # over the cap in its second read
def test_the_framer_splits_any_chunking_and_drops_what_passes_the_cap(
    messages: list[bytes], sep: bytes, cap: int, cuts: list[int], terminated: bool
) -> None:
    stream = sep.join(messages) + (sep if terminated and messages else b"")
    framer = Framer(cap, sep)
    out: list[bytearray | Oversized] = []
    edges = [0, *sorted(c for c in cuts if c <= len(stream)), len(stream)]
    for a, b in itertools.pairwise(edges):
        out += framer.feed(stream[a:b])
    last = framer.leftover()
    if last is not None:
        out.append(last)
    expected = list(messages)
    if expected and not terminated and expected[-1] == b"":
        expected.pop()  # an empty unterminated last message is no message
    assert len(out) == len(expected)
    for got, message in zip(out, expected, strict=True):
        if len(message) > cap:
            assert got == Oversized(message[:EDGE], message[-EDGE:], len(message))
        else:
            assert isinstance(got, bytearray) and got == message
    assert framer.leftover() is None


def test_a_dropped_response_becomes_the_error_of_the_request_it_answered() -> None:
    message = too_large(300_000, 262_144, "upstream")
    assert message == (
        "the upstream sent a message of more than 262,144 bytes (300,000 read), over the "
        "proxy's --max-message-bytes cap; it was dropped without being buffered"
    )
    for head, tail, request_id in [
        (b' {"id": 7, "result": {"x": "', b"", 7),
        (b'{"jsonrpc":"2.0","id":"a\\"b","result":', b"", 'a"b'),
        (b'{"result": {"text": "', b'"}, "jsonrpc": "2.0", "id": -3}\n', -3),
        (b'{"result": [', b'], "id": "z" } ', "z"),
    ]:
        got = oversized(head, tail, 300_000, 262_144, "upstream")
        assert not isinstance(got, Unmatched)
        error = got.message
        assert isinstance(error, types.JSONRPCError)
        assert error.id == request_id and error.error.message == message
        assert error.error.code == types.INTERNAL_ERROR and error.jsonrpc == "2.0"


@pytest.mark.parametrize(
    ("head", "tail", "reply"),
    [
        (b'{"method": "sampling/createMessage", "id": 4, "params": {', b"}}", False),
        (b'{"jsonrpc": "2.0", "method": "notifications/x", "params": {', b'"id": 4}', False),
        (b'{"result": {"a": [{"id": 5}', b"]}}", True),
        (b'{"id": true, "result": 1', b"}", True),
        (b"not json at all", b"", True),
    ],
)
def test_a_dropped_message_that_names_no_request_of_ours_is_unmatched(
    head: bytes, tail: bytes, reply: bool
) -> None:
    got = rejected(head, tail, "dropped")
    assert isinstance(got, Unmatched)
    assert str(got) == "dropped" and got.reply is reply


def test_a_framer_fed_nothing_has_no_leftover() -> None:
    assert Framer(10).leftover() is None
    assert Framer(10, b"\r\n").leftover() is None
