"""Faults the JSONL storage tests inject: an unlink that fails."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest


class FlakyUnlink:
    """``os.unlink`` that fails (EACCES) for one path while ``failing`` is set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, path: Path) -> None:
        self.path, self.failing, self.refused = str(path), True, 0
        real = os.unlink

        def unlink(p: Any, *args: Any, **kwargs: Any) -> None:
            if self.failing and os.fspath(p) == self.path:
                self.refused += 1
                raise PermissionError(errno.EACCES, "simulated", self.path)
            real(p, *args, **kwargs)

        monkeypatch.setattr(os, "unlink", unlink)
