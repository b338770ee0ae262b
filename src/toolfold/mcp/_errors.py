"""The MCP integration's exceptions (one module per layer)."""

from __future__ import annotations


class McpHostError(Exception):
    """Base class of ``toolfold.mcp`` errors: the message names the bad value and the fix."""


class ToolSpecError(McpHostError, ValueError):
    """A ``--tools module:attr`` that does not name importable toolfold tools."""


__all__ = ["McpHostError", "ToolSpecError"]
