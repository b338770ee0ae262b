"""What ``apply`` promises when something other than a refusal goes wrong mid-batch: only a
``ChordError`` escapes (a ``ShapeError`` for too deep a recursion), a ``KeyboardInterrupt``
still propagates, and in every case the target is left as it was.

No valid input reaches these handlers today (every refusal is a ``ChordError`` and nothing
recurses unchecked), so the failure is injected into the per-op step after the batch's first
op has already changed the target: the handlers are the guard against a future bug there.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from toolfold.chord import ChordError, ShapeError, apply
from toolfold.chord import _apply as applier

TARGET = {"log": ["x"], "title": "draft", "n": 1}
BATCH = [["s", ["n"], 2], ["a", ["title"], " two"], ["d", ["log"]]]


def _fail_on_second_op(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    real = applier._apply_one

    def step(root: Any, op: list[Any], undo: Any, where: str, *rest: Any) -> Any:
        if where == "op 1":
            raise error
        return real(root, op, undo, where, *rest)

    monkeypatch.setattr(applier, "_apply_one", step)


def test_a_foreign_error_becomes_a_chord_error_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    boom = RuntimeError("boom")
    _fail_on_second_op(monkeypatch, boom)
    target = copy.deepcopy(TARGET)
    with pytest.raises(ChordError) as caught:
        apply(target, BATCH)
    assert type(caught.value) is ChordError
    assert str(caught.value) == "could not apply the batch: RuntimeError: boom"
    assert caught.value.__cause__ is boom
    assert target == TARGET


def test_too_deep_a_recursion_becomes_a_shape_error_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fail_on_second_op(monkeypatch, RecursionError("maximum recursion depth exceeded"))
    target = copy.deepcopy(TARGET)
    with pytest.raises(ShapeError) as caught:
        apply(target, BATCH)
    assert str(caught.value) == "a path or payload is nested too deeply to apply"
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert target == TARGET


def test_an_interrupt_propagates_and_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    interrupt = KeyboardInterrupt()
    _fail_on_second_op(monkeypatch, interrupt)
    target = copy.deepcopy(TARGET)
    with pytest.raises(KeyboardInterrupt) as caught:
        apply(target, BATCH)
    assert caught.value is interrupt
    assert target == TARGET
