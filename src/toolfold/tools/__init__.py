"""Built-in tools: ``bash``, ``read``, ``grep``, ``pytest``, and for commands ``bash``
left running in the background ``bash_read``, ``bash_write``, ``bash_signal``,
``bash_stop`` and ``bash_list``.

Each is a ``toolfold.harness.Tool`` that writes into its ``ToolOutput`` and returns
nothing. ``builtin_tools()`` returns them all for a ``Harness``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolfold._lazy import lazy_exports

if TYPE_CHECKING:
    from toolfold.harness import Tool

    from .bash import BASH, BashParams, bash_tool
    from .bash_background import BACKGROUND_TOOLS
    from .grep import GREP, GrepParams
    from .pytest_tool import PYTEST, PytestParams
    from .read import READ, ReadParams

# Each tool is imported on first use: `toolfold run` needs bash alone (read, grep and
# pytest define pydantic models), and a module of this package that builds no tool
# imports neither the harness nor asyncio.
__getattr__ = lazy_exports(
    __name__,
    {
        "BASH": ".bash",
        "BashParams": ".bash",
        "bash_tool": ".bash",
        "BACKGROUND_TOOLS": ".bash_background",
        "GREP": ".grep",
        "GrepParams": ".grep",
        "PYTEST": ".pytest_tool",
        "PytestParams": ".pytest_tool",
        "READ": ".read",
        "ReadParams": ".read",
    },
)


def builtin_tools() -> list[Tool[Any]]:
    """The built-in tools, in a stable order: bash, read, grep, pytest, then the tools
    for background commands (bash_read, bash_write, bash_signal, bash_stop, bash_list)."""
    from .bash import BASH
    from .bash_background import BACKGROUND_TOOLS
    from .grep import GREP
    from .pytest_tool import PYTEST
    from .read import READ

    return [BASH, READ, GREP, PYTEST, *BACKGROUND_TOOLS]


__all__ = [
    "BACKGROUND_TOOLS",
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
