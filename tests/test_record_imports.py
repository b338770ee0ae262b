"""Records without ``dataclasses``: declaring, building, comparing, hashing, printing,
replacing and pickling records in a fresh interpreter loads neither ``dataclasses`` nor
``inspect``; reading what dataclass's functions read (``__dataclass_fields__``), a
generated docstring or a frozen record's error is what loads them. An assertion about
the modules a process holds, not timing."""

from __future__ import annotations

import pytest

from fresh_modules import modules_after

RECORDS = """
import pickle
from typing import ClassVar
from toolfold._record import field, record, replace

@record(frozen=True, slots=True)
class Base:
    '''A base.'''
    x: int
    tags: tuple[str, ...] = field(default_factory=tuple)
    kind: ClassVar[str] = "base"

@record(frozen=True, slots=True, kw_only=True)
class Sub(Base):
    '''A subclass.'''
    note: str = field(default="", repr=False, compare=False)

@record
class Mutable:
    '''Not frozen.'''
    count: int
    seen: int = field(init=False, default=0)
    def __post_init__(self):
        self.seen = self.count

@record(frozen=True)
class Docless:
    x: int

sub = Sub(1, note="n")
assert sub == Sub(1) and hash(sub) == hash(Sub(1)) and repr(sub) == "Sub(x=1, tags=())"
assert replace(sub, x=2).x == 2 and pickle.loads(pickle.dumps(sub)) == sub
assert Mutable(3).seen == 3 and Sub.__match_args__ == ("x", "tags")
assert Docless(1) == Docless(1) and repr(Docless(2)) == "Docless(x=2)"
"""


def test_records_load_neither_dataclasses_nor_inspect() -> None:
    loaded = modules_after(RECORDS)
    assert "toolfold._record" in loaded
    assert sorted({"dataclasses", "inspect"} & loaded) == []


@pytest.mark.parametrize(
    ("reading", "loads"),
    [
        ("Sub.__dataclass_fields__", {"dataclasses"}),
        ("Base(1).__dataclass_params__", {"dataclasses"}),
        ("Docless.__doc__", {"inspect"}),
        ("assert Base.__doc__ == 'A base.'", set()),
        (
            "try:\n    Base(1).x = 2\nexcept AttributeError as e:\n"
            "    assert type(e).__name__ == 'FrozenInstanceError'",
            {"dataclasses"},
        ),
    ],
)
def test_what_loads_them(reading: str, loads: set[str]) -> None:
    """The check above can fail: these readings load them."""
    loaded = modules_after(RECORDS + reading + "\n")
    assert {"dataclasses", "inspect"} & loaded >= loads
    if not loads:
        assert not {"dataclasses", "inspect"} & loaded
