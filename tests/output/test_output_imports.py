"""The output sink, its state, windows and policy import no asyncio (a run without an
event loop uses them), and the package imports only its errors until a name is used.
An assertion about behaviour (the modules a fresh process loads), not timing."""

from __future__ import annotations

import pytest

from fresh_modules import loaded_of

WITHOUT_ASYNCIO = (
    "toolfold.output",
    "toolfold.output._sink",
    "toolfold.output._state",
    "toolfold.output._retention",
    "toolfold.output._textwindow",
    "toolfold.output._headtail",
)


@pytest.mark.parametrize("module", WITHOUT_ASYNCIO)
def test_module_imports_without_asyncio(module: str) -> None:
    assert loaded_of((module,), ("asyncio",)) == []


def test_the_package_and_text_output_leave_the_rest_out() -> None:
    """The package alone loads no sink; a sink loads no assistant message's output, and
    base64 waits for the first image."""
    assert loaded_of(("toolfold.output",), ("toolfold.output._sink", "toolfold.execenv")) == []
    assert loaded_of(("toolfold.output._sink",), ("toolfold.output._assistant", "base64")) == []
