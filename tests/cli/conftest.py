"""Fixtures shared by the CLI tests."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator

import pytest


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test started (each in its own process group), killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
