"""The public surface: every exported name exists, lives where we mean, and is documented."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "toolfold"
PUBLIC_PACKAGES = [
    "toolfold.chord",
    "toolfold.execenv",
    "toolfold.storage",
    "toolfold.output",
    "toolfold.durability",
    "toolfold.harness",
    "toolfold.tools",
    "toolfold.server",
    "toolfold.history",
    "toolfold.mcp",
    "toolfold.integrations",
    "toolfold.agent",
    "toolfold.integrations.pydantic_ai",
    "toolfold.integrations.openai_agents",
    "toolfold.integrations.langgraph",
]


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_all_names_exist_and_are_unique(package: str) -> None:
    module = importlib.import_module(package)
    exported = getattr(module, "__all__", None)
    assert exported, f"{package} must declare __all__"
    assert len(exported) == len(set(exported)), f"{package}.__all__ repeats a name"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names missing attributes: {missing}"


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_exported_classes_and_functions_are_ours_and_documented(package: str) -> None:
    module = importlib.import_module(package)
    undocumented = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        owner = getattr(obj, "__module__", "")
        if owner in {"typing", "typing_extensions"}:
            continue  # a type alias such as JSON = Any
        assert owner.startswith("toolfold."), f"{package}.{name} comes from {owner}"
        if not (obj.__doc__ or "").strip():
            undocumented.append(name)
    assert not undocumented, f"{package}: public names without a docstring: {undocumented}"


def test_chord_is_extractable() -> None:
    """toolfold.chord imports nothing else from toolfold (also enforced by import-linter)."""
    for path in (SRC / "chord").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                assert not node.module.startswith("toolfold.") or node.module.startswith(
                    "toolfold.chord"
                ), f"{path.name} imports {node.module}"


def test_every_module_says_what_it_is_for() -> None:
    silent = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        doc = ast.get_docstring(tree)
        if not doc or not doc.strip():
            silent.append(str(path.relative_to(SRC)))
    assert not silent, f"modules without a one-line docstring: {silent}"
