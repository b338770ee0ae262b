"""UTF-16 unit arithmetic (``chord._text``) against a plain reference that walks code points.

The fast paths (UTF-8 lead-byte counting, one encode/decode round trip) must agree with
JavaScript's counting for any string, including lone surrogates (which a ``t`` op can
leave at the start of a string) and lone surrogates that would pair up once encoded.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from toolfold.chord import utf16_len
from toolfold.chord._text import drop_utf16_prefix, utf16_prefix_len

_ALPHABET = st.sampled_from(
    ["a", "\n", "é", "漢", "\uffff", "😀", "\U00010000", "\U0010ffff", "\ud83d", "\ude00", "\udc00"]
)
_TEXT = st.lists(_ALPHABET, max_size=40).map("".join)


def _units(ch: str) -> int:
    return 2 if ord(ch) > 0xFFFF else 1


def _reference_drop(s: str, n: int) -> str:
    """``s.slice(n)`` in JavaScript, walking code points."""
    if n <= 0:
        return s
    units = 0
    for i, ch in enumerate(s):
        if units == n:
            return s[i:]
        units += _units(ch)
        if units == n + 1:  # n falls inside this astral character: keep its low half
            return chr(0xDC00 + ((ord(ch) - 0x10000) & 0x3FF)) + s[i + 1 :]
    return ""


@given(_TEXT)
def test_utf16_len_counts_like_javascript(s: str) -> None:
    assert utf16_len(s) == sum(_units(ch) for ch in s)


@given(_TEXT, st.integers(min_value=-2, max_value=90))
def test_drop_utf16_prefix_is_javascript_slice(s: str, n: int) -> None:
    assert drop_utf16_prefix(s, n) == _reference_drop(s, n)


def test_lone_surrogates_that_pair_once_encoded_are_still_counted_apart() -> None:
    # A lone high and a lone low surrogate side by side are two units in JavaScript
    # (and here), though UTF-16 encoding them makes a valid pair that decodes as one.
    s = "x\ud83d\ude00y"
    assert utf16_len(s) == 4
    assert drop_utf16_prefix(s, 2) == "\ude00y"
    assert drop_utf16_prefix(s, 3) == "y"


@given(_TEXT, st.integers(min_value=-2, max_value=90))
def test_utf16_prefix_len_rounds_up_like_the_reference(s: str, units: int) -> None:
    expected = 0
    if units > 0:
        seen = 0
        for ch in s:
            if seen >= units:
                break
            seen += _units(ch)
            expected += 1
    assert utf16_prefix_len(s, units) == expected


def test_long_astral_runs_take_a_few_steps_not_one_per_character() -> None:
    s = "😀" * 5000 + "a"
    assert drop_utf16_prefix(s, 9999) == "\ude00" + "😀" * 0 + "a"
    assert drop_utf16_prefix(s, 6000) == "😀" * 2000 + "a"
    assert utf16_prefix_len(s, 7) == 4
