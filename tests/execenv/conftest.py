"""Shared fixtures of the exec-env tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfold.execenv import Sandbox


@pytest.fixture(params=[None, "workspace-write"], ids=["host", "sandboxed"])
def sandbox(tmp_path: Path, request: pytest.FixtureRequest) -> Sandbox | None:
    """Each test that takes this runs unconfined and again in the sandbox: bounds, the
    spill, cancellation and timeouts must not change inside it. ``tmp_path``, where the
    tests keep pid files and fifos, stays writable."""
    if request.param is None:
        return None
    return Sandbox(request.param, writable=(str(tmp_path),))
