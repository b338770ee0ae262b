"""The public fronts export what they mean: every name in __all__ exists and lives in the package."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["toolfold.output", "toolfold.harness", "toolfold.tools"])
def test_all_names_exist_and_come_from_the_package(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__doc__
    for name in module.__all__:
        obj = getattr(module, name)
        owner = getattr(obj, "__module__", None)
        if owner is not None and isinstance(obj, type):
            # The harness re-exports the durability layer's names (it sits below it).
            allowed = (
                (package, "toolfold.durability.") if package == "toolfold.harness" else (package,)
            )
            assert owner.startswith(allowed), (name, owner)


def test_private_modules_start_with_a_docstring() -> None:
    import pkgutil

    for package in ("toolfold.output", "toolfold.tools"):
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            mod = importlib.import_module(f"{package}.{info.name}")
            assert mod.__doc__ and mod.__doc__.strip(), mod.__name__
