"""How to install an optional extra, said the same way wherever a missing one is reported.

toolfold is installed from a checkout or from a wheel built from one, not from the package
index, so ``pip install 'toolfold[mcp]'`` would fail as written. The hint names a command
that works from where this copy of toolfold was installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["install_hint", "missing_extra"]


def _checkout() -> Path | None:
    """The checkout this toolfold runs from (an editable install), or ``None``."""
    package = Path(__file__).resolve().parent
    root = package.parent.parent
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def install_hint(extra: str) -> str:
    """A command that installs ``extra`` into the Python running toolfold."""
    root = _checkout()
    if root is not None:
        return f"{sys.executable} -m pip install -e '{root}[{extra}]'"
    return (
        f"{sys.executable} -m pip install 'PATH/TO/toolfold[{extra}]' "
        "(a toolfold checkout or wheel: toolfold is not on the package index)"
    )


def missing_extra(feature: str, extra: str, module: str | None) -> str:
    """One line: ``feature`` needs ``extra``, which ``module`` missing shows, and how to get it."""
    what = f" ({module} is not installed)" if module else ""
    return f"{feature} needs the {extra} extra{what}; install it with: {install_hint(extra)}"
