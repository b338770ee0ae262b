"""The one byte formatter and plural rule used wherever a person reads a size or a count."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolfold._units import format_bytes, parse_size, plural

_SHAPE = re.compile(
    r"(\d+) B|(\d)\.(\d) (KiB|MiB|GiB|TiB|PiB)|(\d{1,3}(?:,\d{3})?) (KiB|MiB|GiB|TiB|PiB)"
)
_POWER = {"KiB": 1, "MiB": 2, "GiB": 3, "TiB": 4, "PiB": 5}


def test_examples_read_as_a_person_expects() -> None:
    assert [format_bytes(n) for n in (0, 1, 1023, 1024, 1536, 4000, 10 * 1024 * 1024)] == [
        "0 B", "1 B", "1023 B", "1.0 KiB", "1.5 KiB", "3.9 KiB", "10 MiB",
    ]  # fmt: skip
    # the footer that once read "(3.9 KB of 204800.0 KB)"
    assert format_bytes(200 * 1024 * 1024) == "200 MiB"
    assert format_bytes(1024 * 1024 - 1) == "1.0 MiB"  # never "1024 KiB"
    assert format_bytes(-1536) == "-1.5 KiB"


@given(st.integers(min_value=0, max_value=2**62))
def test_format_bytes_is_close_short_and_monotonic(n: int) -> None:
    text = format_bytes(n)
    m = _SHAPE.fullmatch(text)
    assert m, text
    if m.group(1) is not None:
        assert int(m.group(1)) == n < 1024
        return
    if m.group(2) is not None:
        value, unit = Fraction(int(m.group(2)) * 10 + int(m.group(3)), 10), m.group(4)
        error = Fraction(1, 20)  # half of the last digit shown
    else:
        value, unit = Fraction(int(m.group(5).replace(",", ""))), m.group(6)
        error = Fraction(1, 2)
        assert value >= 10
    assert value < 1024 or unit == "PiB"
    exact = Fraction(n, 1024 ** _POWER[unit])
    assert abs(exact - value) <= error  # rounded, never truncated
    assert _rank(format_bytes(n + 1)) >= _rank(text)  # a bigger size never reads smaller


def _rank(text: str) -> Fraction:
    m = _SHAPE.fullmatch(text)
    assert m
    if m.group(1) is not None:
        return Fraction(int(m.group(1)))
    if m.group(2) is not None:
        return Fraction(int(m.group(2)) * 10 + int(m.group(3)), 10) * 1024 ** _POWER[m.group(4)]
    return int(m.group(5).replace(",", "")) * Fraction(1024 ** _POWER[m.group(6)])


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["line", "call"]))
def test_plural(count: int, word: str) -> None:
    text = plural(count, word)
    assert text == f"{count:,} {word}" + ("" if count == 1 else "s")
    assert plural(1, "settled result") == "1 settled result"
    assert plural(2, "entry", "entries") == "2 entries"


@given(st.integers(min_value=0, max_value=2**40), st.sampled_from(["", "K", "M", "G"]))
def test_parse_size_reads_every_spelling_of_a_size_alike(n: int, unit: str) -> None:
    value = n << {"": 0, "K": 10, "M": 20, "G": 30}[unit]
    spellings = [f"{n}{unit}", f"{n}{unit.lower()}", f" {n} {unit} "]
    if unit:
        spellings += [f"{n}{unit}iB", f"{n}{unit}B", f"{n}{unit.lower()}ib"]
    assert {parse_size(s) for s in spellings} == {value}


@pytest.mark.parametrize("text", ["", "K", "lots", "1.5M", "-1", "1X", "1 K B", "9" * 31])
def test_parse_size_refuses_what_is_not_a_size_in_one_line(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_size(text)
    assert str(caught.value) == (
        f"{text!r} is not a size: give bytes, or a whole number with K, M or G "
        "(powers of 1024), e.g. 51200, 50K or 1G"
    )
