"""Built-in tools: ``bash``, ``read``, ``grep`` and ``pytest``.

Each is a ``toolfold.harness.Tool`` that writes into its ``ToolOutput`` and returns
nothing. ``builtin_tools()`` returns them all for a ``Harness``.
"""

from __future__ import annotations

from typing import Any

from toolfold.harness import Tool

from .bash import BASH, BashParams, bash_tool
from .grep import GREP, GrepParams
from .pytest_tool import PYTEST, PytestParams
from .read import READ, ReadParams


def builtin_tools() -> list[Tool[Any]]:
    """The built-in tools, in a stable order: bash, read, grep, pytest."""
    return [BASH, READ, GREP, PYTEST]


__all__ = [
    "BASH",
    "GREP",
    "PYTEST",
    "READ",
    "BashParams",
    "GrepParams",
    "PytestParams",
    "ReadParams",
    "bash_tool",
    "builtin_tools",
]
