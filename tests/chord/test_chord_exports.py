"""The public front of toolfold.chord: the names other layers rely on, and where they live."""

from __future__ import annotations

import importlib
import inspect

import toolfold.chord as chord

REQUIRED = {
    "apply",
    "Encoder",
    "Decoder",
    "is_base",
    "validate_op",
    "validate_wire_op",
    "check_json",
    "ChordError",
    "PathError",
    "UnsafePathError",
    "ShapeError",
    "JSONValueError",
    "JSON",
    "Op",
    "WireOp",
    "Batch",
    "Path",
    "utf16_len",
    "RESERVED_SEGMENTS",
    "track",
    "Tracker",
}


def test_required_names_are_exported() -> None:
    assert set(chord.__all__) >= REQUIRED
    for name in chord.__all__:
        assert hasattr(chord, name), name


def test_functions_and_classes_live_in_private_modules_of_the_package() -> None:
    for name in chord.__all__:
        obj = getattr(chord, name)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)) or obj.__module__ == "typing":
            continue  # type aliases (JSON is typing.Any) and constants
        module = obj.__module__
        assert module.startswith("toolfold.chord._"), (name, module)
        assert getattr(importlib.import_module(module), name) is obj


def test_error_hierarchy() -> None:
    assert issubclass(chord.ChordError, ValueError)
    for cls in (chord.ShapeError, chord.PathError, chord.UnsafePathError):
        assert issubclass(cls, chord.ChordError)
    assert issubclass(chord.JSONValueError, chord.ShapeError)
    assert issubclass(chord.JSONValueError, TypeError)
    assert chord.PathError("m", path=[1]).path == [1]
    assert chord.UnsafePathError("m", segment="__proto__").segment == "__proto__"
    assert frozenset({"__proto__", "constructor", "prototype"}) == chord.RESERVED_SEGMENTS
