"""The ``toolfold`` command line: run commands through the harness, inspect and resume sessions."""

from __future__ import annotations

from ._entry import main

__all__ = ["main"]
