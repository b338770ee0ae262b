"""What importing the exec env costs: the modules a run without an event loop uses
(capture, windows, spill, spawn, results, limits, errors, updates, views) import no
asyncio, and neither does the package itself. An assertion about behaviour (the modules
a fresh process loads), not timing."""

from __future__ import annotations

import pytest

from fresh_modules import loaded_of

WITHOUT_ASYNCIO = (
    "toolfold.execenv",
    "toolfold.execenv._capture",
    "toolfold.execenv._window",
    "toolfold.execenv._headtail",
    "toolfold.execenv._spill",
    "toolfold.execenv._spawn",
    "toolfold.execenv._exec_result",
    "toolfold.execenv._limits",
    "toolfold.execenv._errors",
    "toolfold.execenv._updates",
    "toolfold.execenv._output_view",
    "toolfold.execenv._session",
    "toolfold.execenv._publisher",
    "toolfold.execenv._pipes",
    "toolfold.execenv._reaper",
    "toolfold.execenv._child",
)


@pytest.mark.parametrize("module", WITHOUT_ASYNCIO)
def test_module_imports_without_asyncio(module: str) -> None:
    assert loaded_of((module,), ("asyncio",)) == []


def test_the_package_imports_only_its_errors() -> None:
    """A name is imported on first use: the package alone loads no capture, no env, no
    background machinery."""
    watched = (
        "toolfold.execenv._local",
        "toolfold.execenv._capture",
        "toolfold.execenv._background",
        "toolfold.execenv._session",
        "toolfold.execenv._spill",
    )
    assert loaded_of(("toolfold.execenv",), watched) == []


def test_a_foreground_env_leaves_the_background_machinery_out() -> None:
    """``LocalExecEnv`` makes its background registry (and imports its modules, the
    ledger and the terminal's) only once a command may go to the background."""
    watched = (
        "toolfold.execenv._background",
        "toolfold.execenv._background_entry",
        "toolfold.execenv._ledger",
        "toolfold.execenv._pty",
        "termios",
    )
    assert loaded_of(("toolfold.execenv._local",), watched) == []


def test_the_updates_after_the_first_are_defined_on_first_use() -> None:
    """``Append``, ``Slide`` and ``Metadata`` (``_deltas``) load once a stream needs
    more than its first ``Replace``; every name stays where it was."""
    watched = ("toolfold.execenv._deltas",)
    assert loaded_of(("toolfold.execenv._updates", "toolfold.execenv._session"), watched) == []

    import toolfold.execenv as execenv
    from toolfold.execenv import _deltas, _session, _updates

    for name in ("Append", "Slide", "Metadata"):
        assert getattr(execenv, name) is getattr(_updates, name) is getattr(_deltas, name)
    union = _updates.Replace | _deltas.Append | _deltas.Slide | _deltas.Metadata
    assert execenv.ShellOutputUpdate == _updates.ShellOutputUpdate == union
    assert execenv.UpdateConsumer == _session.UpdateConsumer
    with pytest.raises(AttributeError):
        _updates.Nothing  # noqa: B018
    with pytest.raises(AttributeError):
        _session.Nothing  # noqa: B018
