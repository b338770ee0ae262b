"""The output sink, its state, windows and policy import no asyncio (a run without an
event loop uses them), and the package imports only its errors until a name is used.
An assertion about behaviour (the modules a fresh process loads), not timing."""

from __future__ import annotations

import subprocess
import sys

import pytest

WITHOUT_ASYNCIO = (
    "toolfold.output",
    "toolfold.output._sink",
    "toolfold.output._state",
    "toolfold.output._retention",
    "toolfold.output._textwindow",
    "toolfold.output._headtail",
)

_SCRIPT = """
import sys
for name in sys.argv[1:]:
    __import__(name)
print(" ".join(sorted(m for m in {names} if m in sys.modules)))
"""


def loaded(modules: tuple[str, ...], watched: tuple[str, ...]) -> list[str]:
    """Which of ``watched`` a fresh interpreter has loaded after importing ``modules``."""
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(names=set(watched)), *modules],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return proc.stdout.split()


@pytest.mark.parametrize("module", WITHOUT_ASYNCIO)
def test_module_imports_without_asyncio(module: str) -> None:
    assert loaded((module,), ("asyncio",)) == []


def test_the_package_and_text_output_leave_the_rest_out() -> None:
    """The package alone loads no sink; a sink loads no assistant message's output, and
    base64 waits for the first image."""
    assert loaded(("toolfold.output",), ("toolfold.output._sink", "toolfold.execenv")) == []
    assert loaded(("toolfold.output._sink",), ("toolfold.output._assistant", "base64")) == []
