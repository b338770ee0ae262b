"""toolfold._json: orjson and the standard library's json read and write the same values
(every value ``check_json`` accepts), refuse the same malformed documents with the same
error type, and the process-wide choice is made once, at first use."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fresh_modules import modules_after
from json_values import same
from toolfold._json import Codec, orjson_codec, standard_library_codec
from toolfold.chord import MAX_SAFE_INTEGER, check_json

CODECS = [orjson_codec(), standard_library_codec()]
PAIRS = [(a, b) for a in CODECS for b in CODECS]
PAIR_IDS = [f"{a.name}->{b.name}" for a, b in PAIRS]

characters = st.characters(exclude_categories=["Cs"])  # any code point but a surrogate
texts = st.text(characters, max_size=12) | st.sampled_from(
    ["", "\x00", "\x1f\x7f", '"\\/', "\u2028\u2029", "é", "😀", "\U0010ffff", "\ufeff"]
)
numbers = (
    st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.sampled_from([MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER, 0, 2**31, 2**32, -(2**40)])
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1e-05, 1e16, 1e-7, 5e-324, 1.7976931348623157e308, 0.1])
)
values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(texts, children, max_size=4),
    max_leaves=20,
)


@pytest.mark.parametrize(("encoder", "decoder"), PAIRS, ids=PAIR_IDS)
@given(value=values)
def test_each_codec_reads_what_either_wrote(encoder: Codec, decoder: Codec, value: Any) -> None:
    check_json(value)  # the values that reach a store
    assert same(decoder.loads(encoder.dumps(value)), value)
    assert same(decoder.loads(encoder.dumps(value).decode()), value)  # text too
    ordered = decoder.loads(encoder.dumps_sorted(value))
    assert ordered == value
    if isinstance(ordered, dict):
        assert list(ordered) == sorted(ordered)


@given(value=values)
def test_both_write_compact_utf8(value: Any) -> None:
    """Same layout: no spaces, non-ASCII unescaped. Only a float's spelling may differ,
    so a document without floats is the same bytes."""
    encoded = [codec.dumps(value) for codec in CODECS]
    if not _has_float(value):
        assert encoded[0] == encoded[1]
    for data in encoded:
        assert json.loads(data) == value


def _has_float(value: Any) -> bool:
    if isinstance(value, float):
        return True
    if isinstance(value, list):
        return any(_has_float(v) for v in value)
    if isinstance(value, dict):
        return any(_has_float(v) for v in value.values())
    return False


MALFORMED = [
    b"",
    b"NaN",
    b"-Infinity",
    b"[Infinity]",
    b"1e400",
    b"[1,]",
    b'{"a":1,}',
    b'"\x01"',  # a raw control character in a string
    b'"\\ud800"',  # a lone surrogate escape
    b'["\\udc00x"]',
    b"\xff",  # not UTF-8
    b'"\xed\xa0\x80"',  # a surrogate encoded in UTF-8
    b"\xef\xbb\xbf1",  # a byte order mark
    b"[1] [2]",
    b'{"a"}',
    b"[" * 100_000,  # nested past any decoder's depth
]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@pytest.mark.parametrize("data", MALFORMED)
def test_both_refuse_the_same_malformed_documents(codec: Codec, data: bytes) -> None:
    with pytest.raises(codec.decode_error) as caught:
        codec.loads(data)
    assert isinstance(caught.value, json.JSONDecodeError)  # what code may catch for both


@pytest.mark.parametrize("codec", CODECS, ids=[c.name for c in CODECS])
@pytest.mark.parametrize("value", ["\ud800", ["a\udfff"], {"k": object()}, b"x"])
def test_both_refuse_to_encode_what_is_not_a_checked_value(codec: Codec, value: Any) -> None:
    with pytest.raises(TypeError):
        codec.dumps(value)


@pytest.mark.parametrize("value", [math.nan, -math.inf])
def test_a_float_that_is_not_json_is_null_to_orjson_and_refused_by_json(value: float) -> None:
    """A difference outside the checked values (``check_json`` refuses both), stated in
    the module's docstring."""
    orjson, stdlib = CODECS
    assert orjson.dumps(value) == b"null"
    with pytest.raises(TypeError):
        stdlib.dumps(value)


def test_a_surrogate_pair_escape_reads_as_one_character() -> None:
    for codec in CODECS:
        assert codec.loads(b'"\\ud83d\\ude00"') == "😀"


PROBE = (
    "from toolfold import _json\n"
    "import sys\n"
    "{before}\n"
    "assert _json.loads(_json.dumps({{'a': [1, 2.5, 'é']}})) == {{'a': [1, 2.5, 'é']}}\n"
    "{after}\n"
    "print('codec', _json.codec_name())\n"
)


def test_nothing_is_chosen_until_first_use_and_the_default_is_orjson() -> None:
    loaded = modules_after(
        PROBE.format(
            before="assert _json.codec_name() is None and 'orjson' not in sys.modules",
            after="_json.prefer_standard_library()  # too late: orjson stays",
        )
        + "assert _json.codec_name() == 'orjson' and _json.DecodeError.__module__ == 'orjson'\n"
    )
    assert "orjson" in loaded


def test_a_process_that_prefers_the_standard_library_never_loads_orjson() -> None:
    loaded = modules_after(
        PROBE.format(before="_json.prefer_standard_library()", after="") + "import json\n"
        "assert _json.codec_name() == 'json' and _json.DecodeError is json.JSONDecodeError\n"
        "try:\n"
        "    _json.loads(b'NaN')\n"
        "except _json.DecodeError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError('NaN read')\n"
    )
    assert "orjson" not in loaded and "json" in loaded
