"""The public front of toolfold.storage: exported names, their home modules, addresses."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolfold.storage as storage
from toolfold.storage import (
    SESSION,
    EphemeralScope,
    ScopeError,
    StorageError,
    encode_scope_id,
    ephemeral_scope,
    list_address,
    scope_of,
    set_value,
    value,
)
from toolfold.storage._records import check_session_name


def test_all_names_exist_and_come_from_private_modules() -> None:
    assert sorted(storage.__all__) == sorted(set(storage.__all__))
    for name in storage.__all__:
        obj = getattr(storage, name)
        module = getattr(obj, "__module__", None)
        if isinstance(obj, type) or (callable(obj) and module != "typing"):  # aliases are unions
            assert module is not None and module.startswith("toolfold.storage._"), name
    for cls in ("Session", "Repository", "MemoryRepository", "FsyncPolicy", "CommitResult"):
        assert cls in storage.__all__
    assert issubclass(storage.InvalidValueError, TypeError)
    for err in (
        "ScopeError",
        "CorruptStoreError",
        "ClosedError",
        "BackendError",
        "SessionNotFoundError",
        "SessionExistsError",
        "InvalidValueError",
    ):
        assert issubclass(getattr(storage, err), StorageError)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("", "scope id must be non-empty; pass the operation id"),
        (
            "a\ud800b",
            "scope id 'a\\ud800b' contains a lone surrogate '\\ud800' at index 1; scope ids must be valid Unicode",
        ),
        ("x\x00", "scope id 'x\\x00' contains a NUL character; not every backend can store it"),
        (3, "scope id must be a str, got int 3; pass the operation id as text"),
    ],
)
def test_invalid_scope_ids(bad: object, message: str) -> None:
    with pytest.raises(ScopeError) as e:
        ephemeral_scope(bad)  # type: ignore[arg-type]
    assert str(e.value) == message
    with pytest.raises(ScopeError):
        EphemeralScope(bad)  # type: ignore[arg-type]  # direct construction validates too


def test_scope_id_length_is_counted_after_percent_encoding() -> None:
    assert encode_scope_id("op 1/é") == "op%201%2F%C3%A9"
    ephemeral_scope("a" * 180)
    ephemeral_scope("é" * 30)  # 30 x 6 = 180
    with pytest.raises(ScopeError, match=r"is 186 characters after percent-encoding \(limit 180\)"):
        ephemeral_scope("é" * 31)
    with pytest.raises(ScopeError, match="use a shorter id"):
        ephemeral_scope("a" * 181)


def test_addresses_are_frozen_values() -> None:
    op = ephemeral_scope("op")
    assert value("ns", "k") == value("ns", "k", SESSION)
    assert value("ns", "k", op) == value("ns", "k", ephemeral_scope("op"))
    assert value("ns", "k") != value("ns", "k", op)
    assert len({list_address("ns", "k", op), list_address("ns", "k", op)}) == 1
    assert str(value("ns", "k", op)) == "value 'ns'/'k' in ephemeral_scope('op')"
    with pytest.raises(StorageError, match="value namespace must be non-empty"):
        value("", "k")
    with pytest.raises(ScopeError, match="scope must be SESSION or ephemeral_scope"):
        value("ns", "k", "op")  # type: ignore[call-overload]


def test_scope_of() -> None:
    op = ephemeral_scope("op")
    assert scope_of([set_value(value("ns", "k", op), 1)]) == op
    assert scope_of([set_value(value("ns", "k"), 1)]) == SESSION
    with pytest.raises(StorageError, match="scope_of needs at least one write"):
        scope_of([])
    with pytest.raises(ScopeError, match="must stay in one scope"):
        scope_of(iter([set_value(value("ns", "k"), 1), set_value(value("ns", "k", op), 1)]))


def test_tags_are_validated() -> None:
    from toolfold.storage import append_list

    with pytest.raises(
        StorageError, match="tag must be None or a non-empty str of printable characters, got ''"
    ):
        append_list(list_address("ns", "l"), 1, tag="")
    with pytest.raises(StorageError, match="got 'a\\\\nb'"):
        append_list(list_address("ns", "l"), 1, tag="a\nb")


@pytest.mark.parametrize(
    ("key", "index"), [("\ud800", 0), ("ab\udfff", 2), ("é\ud83d\ude00x", 1), ("€\udc00", 1)]
)
def test_an_address_names_its_first_lone_surrogate(key: str, index: int) -> None:
    with pytest.raises(StorageError, match=f"contains a lone surrogate at index {index};"):
        value("ns", key)
    with pytest.raises(ScopeError, match=re.escape(f"surrogate {key[index]!r} at index {index};")):
        ephemeral_scope(key)


@given(
    st.text(alphabet=st.sampled_from("aZ09._-/ é\n\x00"), max_size=130)
    | st.text(alphabet="ab", min_size=127, max_size=130)
)
def test_a_session_name_is_1_to_128_of_its_characters_not_starting_with_a_dot(name: str) -> None:
    valid = re.fullmatch(r"[A-Za-z0-9._-]{1,128}", name) is not None and not name.startswith(".")
    if valid:
        assert check_session_name(name) == name
    else:
        with pytest.raises(StorageError, match="invalid session name"):
            check_session_name(name)
