"""The compact JSONL record encoding: exact bytes, address ids on second use, round
trips, undo of a line that never reached the file, and corrupt records."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolfold.storage import (
    SESSION,
    CorruptStoreError,
    EphemeralScope,
    Scope,
    Write,
    append_entry,
    append_list,
    delete_list,
    delete_value,
    ephemeral_scope,
    list_address,
    retire_scope,
    set_value,
    value,
)
from toolfold.storage._jsonl_records import AddressTable, decode_line, encode_line, undo

OP = ephemeral_scope("op")


def enc(table: AddressTable, writes: list[Write], first_seq: int) -> bytes:
    seqs = tuple(range(first_seq, first_seq + len(writes)))
    line, _, _ = encode_line(table, tuple(writes), seqs)
    return line


def test_address_ids_are_defined_on_second_use() -> None:
    t = AddressTable()
    a = list_address("pending.tool_output", "op:inv", OP)
    assert enc(t, [append_list(a, [["a", ["x"], "1"]], tag="base")], 1) == (
        b'[["l",["pending.tool_output","op:inv"],1,[["a",["x"],"1"]],"base"]]\n'
    )
    assert enc(t, [append_list(a, [["a", 0, "2"]])], 2) == (
        b'[["@",0,"pending.tool_output","op:inv"],["l",0,2,[["a",0,"2"]]]]\n'
    )
    assert enc(t, [append_list(a, 3), delete_list(a)], 3) == b'[["l",0,3,3],["x",0,4,"l"]]\n'


def test_every_record_verb() -> None:
    t = AddressTable()
    v = value("ns", "k")
    line = enc(
        t,
        [
            set_value(v, {"a": [1, 2.5, None, True, "é"]}),
            delete_value(v),
            append_entry({"role": "tool"}),
            append_entry(1, key="call-1"),
            append_entry(2, key=None, summary="two"),
            retire_scope(OP),
            retire_scope(OP),
        ],
        7,
    )
    assert line == (
        b'[["v",["ns","k"],7,{"a":[1,2.5,null,true,"\xc3\xa9"]}],'
        b'["@",0,"ns","k"],["x",0,8],'
        b'["e",9,{"role":"tool"}],["e",10,1,"call-1"],["e",11,2,null,"two"],'
        b'["!","op",12],["@",1,"op"],["!",1,13]]\n'
    )
    t2 = AddressTable()
    out = decode_line(t2, orjson.loads(line), SESSION, path="f", lineno=2)
    assert [(seq, w) for seq, w, _ in out] == [
        (7, set_value(v, {"a": [1, 2.5, None, True, "é"]})),
        (8, delete_value(v)),
        (9, append_entry({"role": "tool"})),
        (10, append_entry(1, key="call-1")),
        (11, append_entry(2, summary="two")),
        (12, retire_scope(OP)),
        (13, retire_scope(OP)),
    ]
    # The payload of each record: what a value, element or entry holds; None for the rest.
    assert [p for _, _, p in out] == [
        {"a": [1, 2.5, None, True, "é"]},
        None,
        {"role": "tool"},
        1,
        2,
        None,
        None,
    ]
    assert t2 == t


def test_same_namespace_key_as_value_and_list_share_an_id() -> None:
    t = AddressTable()
    line = enc(t, [set_value(value("n", "k"), None), append_list(list_address("n", "k"), 1)], 1)
    assert line == b'[["v",["n","k"],1,null],["@",0,"n","k"],["l",0,2,1]]\n'


def test_payload_bytes_are_returned_for_reuse() -> None:
    _, payloads, _ = encode_line(
        AddressTable(),
        (set_value(value("n", "k"), [1]), delete_value(value("n", "k")), append_entry("e")),
        (1, 2, 3),
    )
    assert payloads == [b"[1]", None, b'"e"']


def test_undo_takes_back_a_line_that_never_reached_the_file() -> None:
    t = AddressTable()
    a = list_address("n", "k")
    enc(t, [append_list(a, 1)], 1)
    before = copy.deepcopy(t)
    _, _, token = encode_line(
        t, (append_list(a, 2), append_list(list_address("n", "new"), 3)), (2, 3)
    )
    assert t != before
    undo(t, token)
    assert t == before
    # and the next line defines the id again, as the file needs
    assert enc(t, [append_list(a, 4)], 4) == b'[["@",0,"n","k"],["l",0,4,4]]\n'
    # Undoing a later line keeps the ids defined before it.
    kept = copy.deepcopy(t)
    b = list_address("n", "b")
    _, _, token = encode_line(t, (append_list(b, 5), append_list(b, 6)), (5, 6))
    assert t.by_id == [("n", "k"), ("n", "b")]
    undo(t, token)
    assert t == kept


def test_a_line_with_fewer_seqs_than_writes_is_refused_and_leaves_the_table_alone() -> None:
    t = AddressTable()
    with pytest.raises(ValueError):
        encode_line(t, (append_list(list_address("n", "k"), 1), append_entry(2)), (1,))
    assert t == AddressTable()


def test_a_line_that_fails_to_encode_leaves_the_table_alone() -> None:
    t = AddressTable()
    a = list_address("n", "k")
    enc(t, [append_list(a, 1)], 1)
    before = copy.deepcopy(t)
    with pytest.raises(TypeError):  # storage validates first; the codec must still be safe
        encode_line(t, (append_list(a, 2), append_list(a, {1, 2})), (2, 3))  # type: ignore[arg-type]
    assert t == before


@pytest.mark.parametrize(
    ("line", "scope", "message"),
    [
        ([["l", 0, 1, "x"]], SESSION, "address id 0 is used but was never defined in this file"),
        ([["!", 7, 1]], SESSION, "address id 7 is used but was never defined in this file"),
        ([["@", 0, "n", "k"], ["@", 1, "n", "k"]], SESSION, "record 1: '@' defines ('n', 'k') again (it is id 0)"),
        ([["@", 3, "n", "k"]], SESSION, "record 0: '@' defines id 3 but the next id is 0"),
        ([["@", 0, "op"], ["l", 0, 1, "x"]], SESSION, "address id 0 is not a value/list address"),
        ([["@", 0, "n", "k"], ["!", 0, 1]], SESSION, "address id 0 is not a scope"),
        ([["@"]], SESSION, "record 0: '@' id must be a non-negative integer, got None"),
        ([["@", 0]], SESSION, "record 0: '@' takes 3 or 4 fields, got 2"),
        ([["@", 0, "n", "k", 1]], SESSION, "record 0: '@' takes 3 or 4 fields, got 5"),
        ([["@", 0, 1, "k"]], SESSION, "namespace must be a string, got 1"),
        ([["@", 0, "n", 2]], SESSION, "key must be a string, got 2"),
        ([["@", 0, 5]], SESSION, "scope id must be a string, got 5"),
        ([["e", 1, "x"]], OP, "record 0: 'e' takes 3 to 5 fields and only appears in the main log"),
        ([["e", 1, "x", 5]], SESSION, "entry key must be a string, got 5"),
        ([["e", 1, "x", "k", {}, 1]], SESSION, "record 0: 'e' takes 3 to 5 fields and only appears in the main log"),
        ([["e", True, "x"]], SESSION, "record 0: seq must be a non-negative integer, got True"),
        ([["!", "op", 1]], OP, "record 0: '!' takes 3 fields and only appears in the main log"),
        ([["!", "op", "s"]], SESSION, "record 0: seq must be a non-negative integer, got 's'"),
        ([["!", ["op"], 1]], SESSION, "scope reference must be an id or a scope id string, got ['op']"),
        ([["!", "", 1]], SESSION, "scope id must be non-empty; pass the operation id"),
        ([["l", ["n", "k"], True, "x"]], SESSION, "record 0: seq must be a non-negative integer, got True"),
        ([["l", ["n", "k"], -1, "x"]], SESSION, "record 0: seq must be a non-negative integer, got -1"),
        ([["l", ["n", "k"], 0, "x"]], SESSION, "record 0: seq must be >= 1"),
        ([["l", ["n", "k"], 1]], SESSION, "record 0: 'l' takes 4 or 5 fields, got 3"),
        ([["l", ["n", "k"], 1, "x", ""]], SESSION, "append_list to list 'n'/'k' in SESSION: tag must be None or a non-empty str of printable characters, got ''"),
        ([["l", ["n", "k"], 1, "x", 5]], SESSION, "tag must be a string, got 5"),
        ([["l", ["n"], 1, "x"]], SESSION, "address must be an id or [namespace, key], got ['n']"),
        ([["l", ["", "k"], 1, "x"]], SESSION, "list namespace must be non-empty"),
        ([["l", [1, "k"], 1, "x"]], SESSION, "namespace must be a string, got 1"),
        ([["l", ["n", 2], 1, "x"]], SESSION, "key must be a string, got 2"),
        ([["v", ["n"]]], SESSION, "record 0: 'v' has too few fields (2)"),
        ([["v", ["n", "k"], 1]], SESSION, "record 0: 'v' takes 4 fields, got 3"),
        ([["x", ["n", "k"], 1, "v"]], SESSION, "record 0: 'x' takes 3 fields, or 4 ending in \"l\""),
        ([["q", 1]], SESSION, "record 0: unknown record verb 'q'"),
        ([[1, 2]], SESSION, "record 0 must be an array starting with a verb, got [1, 2]"),
        ([[]], SESSION, "record 0 must be an array starting with a verb, got []"),
        ([], SESSION, "a line must be a non-empty JSON array of records, got []"),
        ({"v": 1}, SESSION, "a line must be a non-empty JSON array of records, got {'v': 1}"),
    ],
)  # fmt: skip
def test_corrupt_records_name_file_line_and_problem(line: Any, scope: Scope, message: str) -> None:
    with pytest.raises(CorruptStoreError) as info:
        decode_line(AddressTable(), line, scope, path="dir/s.jsonl", lineno=12)
    assert str(info.value) == (
        f"dir/s.jsonl: line 12 is not a valid record line ({message}); the file is damaged "
        "or was edited by hand — restore it from a backup or move it away"
    )
    assert info.value.path == "dir/s.jsonl" and info.value.record == 12


# -- round trip (hypothesis) ------------------------------------------------------------

json_leaf = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=8)
json_value = st.recursive(
    json_leaf | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=4,
)
names = st.sampled_from(["a", "b", "ns.x", "é"])
keys = st.sampled_from(["", "k", "op:1", "ü/€"])


def writes_for(scope: Scope) -> st.SearchStrategy[Write]:
    addr_writes: list[st.SearchStrategy[Write]] = [
        st.builds(lambda n, k, v: set_value(value(n, k, scope), v), names, keys, json_value),
        st.builds(lambda n, k: delete_value(value(n, k, scope)), names, keys),
        st.builds(
            lambda n, k, v, tag: append_list(list_address(n, k, scope), v, tag),
            names,
            keys,
            json_value,
            st.none() | st.sampled_from(["base", "t"]),
        ),
        st.builds(lambda n, k: delete_list(list_address(n, k, scope)), names, keys),
    ]
    if scope == SESSION:
        addr_writes += [
            st.builds(
                lambda e, k, s: append_entry(e, key=k, summary=s),
                json_value,
                st.none() | keys,
                st.none() | json_value,
            ),
            st.builds(
                lambda i: retire_scope(ephemeral_scope(i)), st.sampled_from(["op", "op/2", "é"])
            ),
        ]
    return st.one_of(addr_writes)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_round_trip_rebuilds_the_writers_table(data: st.DataObject) -> None:
    scope: Scope = data.draw(st.sampled_from([SESSION, EphemeralScope("op")]))
    txns = data.draw(st.lists(st.lists(writes_for(scope), min_size=1, max_size=4), max_size=8))
    writer, reader = AddressTable(), AddressTable()
    seq = 1
    for txn in txns:
        seqs = tuple(range(seq, seq + len(txn)))
        seq += len(txn) + data.draw(st.integers(0, 2))  # gaps are allowed
        line, payloads, _ = encode_line(writer, tuple(txn), seqs)
        assert line.endswith(b"\n") and line.count(b"\n") == 1  # one line = one transaction
        out = decode_line(reader, orjson.loads(line), scope, path="f", lineno=1)
        assert [s for s, _, _ in out] == list(seqs)
        assert [w for _, w, _ in out] == txn
        for (_, _, decoded), encoded in zip(out, payloads, strict=True):
            if encoded is not None:  # the bytes the index keeps are the line's payload
                assert orjson.loads(encoded) == decoded
        assert reader == writer
