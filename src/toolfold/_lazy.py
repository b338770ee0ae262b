"""Lazy re-exports for package ``__init__`` files: a public name whose module is heavy
and not needed by every command is imported on first use, not with the package.

``toolfold run`` pays for every module its packages import at start-up; this keeps the
public surfaces (``from toolfold.harness import ToolLoop``) unchanged while ``run``
imports only what it uses. Each package also imports the names under
``TYPE_CHECKING``, so type checkers and import-linter still see every dependency.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``exports`` maps a public name to the
    submodule (relative, e.g. ``"._lane"``) that defines it, imported on first access
    and then cached in the package's namespace. A name mapped to the submodule of the
    same name (``"events": ".events"``) is that submodule itself."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # Through ``__import__`` (what an import statement calls), not
        # ``importlib.import_module``: the same import, but one that ``python -X
        # importtime`` reports, so the start-up benchmark and the import checks see it.
        full = package + module if module.startswith(".") else module
        __import__(full)
        value = sys.modules[full]
        if full != f"{package}.{name}":
            value = getattr(value, name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
