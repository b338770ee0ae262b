"""Public surface of toolfold.execenv: exports, the update fold, validation, backpressure."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
from pathlib import Path

import pytest
from execenv_helpers import FakeClock

import toolfold.execenv as execenv
from toolfold.execenv import (
    Append,
    CaptureClosedError,
    CaptureOptions,
    CaptureSession,
    ExecConfigError,
    ExecError,
    Metadata,
    OutputCapture,
    Replace,
    ShellOutputLimits,
    ShellOutputUpdate,
    ShellOutputView,
    Slide,
    UpdateError,
    _spill,
    apply_shell_output_update,
)


def test_exports_are_public_names_of_this_package() -> None:
    for name in execenv.__all__:
        obj = getattr(execenv, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):  # not the type aliases
            assert obj.__module__.startswith("toolfold.execenv._"), (name, obj.__module__)
    assert issubclass(UpdateError, ExecError) and issubclass(UpdateError, ValueError)


def _view(text: str) -> ShellOutputView:
    cap = OutputCapture()
    cap.feed(text.encode())
    snap = cap.snapshot()
    session_meta = execenv.ShellOutputMetadata(truncation=snap.truncation)
    return ShellOutputView(text=text, metadata=session_meta)


def test_fold_of_each_update_kind() -> None:
    v = _view("abc\ndef\n")
    meta = v.metadata
    assert apply_shell_output_update(None, Replace(v)) == v
    assert apply_shell_output_update(v, Append("ghi", meta)).text == "abc\ndef\nghi"
    assert apply_shell_output_update(v, Slide(4, "x\n", meta)).text == "def\nx\n"
    assert apply_shell_output_update(v, Metadata(meta)) == v


def test_slide_drop_counts_code_points() -> None:
    v = _view("é𝄞\nz\n")
    assert apply_shell_output_update(v, Slide(3, "", v.metadata)).text == "z\n"


def test_bad_updates_are_refused_with_clear_messages_and_the_view_is_intact() -> None:
    v = _view("abc\n")
    with pytest.raises(UpdateError, match="Append update applied to no view: the first update"):
        apply_shell_output_update(None, Append("x", v.metadata))
    with pytest.raises(UpdateError, match="Slide drop=9 is outside the view of 4 characters"):
        apply_shell_output_update(v, Slide(9, "x", v.metadata))
    with pytest.raises(UpdateError, match="unknown shell output update 'nope'"):
        apply_shell_output_update(v, "nope")  # type: ignore[arg-type]
    assert v.text == "abc\n"


def test_limits_and_options_validation_names_the_field() -> None:
    with pytest.raises(
        ExecConfigError, match=r"ShellOutputLimits\.max_lines must be a positive int, got -3"
    ):
        ShellOutputLimits(max_lines=-3)
    with pytest.raises(
        ExecConfigError, match="retain must be 'head', 'tail' or 'head_tail', got 'middle'"
    ):
        ShellOutputLimits(retain="middle")  # type: ignore[arg-type]
    with pytest.raises(ExecConfigError, match=r"CaptureOptions\.target_rate must be a number > 0"):
        CaptureOptions(target_rate=0)
    with pytest.raises(ExecConfigError, match="spill_high_water must be a positive int"):
        CaptureOptions(spill_high_water=0)


def test_feeding_a_closed_capture_is_an_error_and_keeps_the_view() -> None:
    cap = OutputCapture()
    cap.feed(b"kept\n")
    cap.close()
    before = cap.snapshot()
    with pytest.raises(CaptureClosedError, match="3 bytes fed to a closed OutputCapture"):
        cap.feed(b"new")
    assert cap.snapshot() == before


def test_tail_moves_as_slides_and_full_turnover_is_a_replace() -> None:
    clock = FakeClock()
    updates: list[ShellOutputUpdate] = []
    session = CaptureSession(
        CaptureOptions(limits=ShellOutputLimits(max_lines=3), spill=False),
        on_update=updates.append,
        clock=clock,
    )
    session.feed(b"1\n2\n3\n")
    clock.advance(1)
    session.feed(b"4\n")
    clock.advance(1)
    session.feed(b"5\n6\n7\n8\n")
    clock.advance(1)
    assert [type(u).__name__ for u in updates] == ["Replace", "Slide", "Replace"]
    slide = updates[1]
    assert isinstance(slide, Slide) and (slide.drop, slide.text) == (2, "4\n")


async def test_spill_backpressure_pauses_reading_until_the_buffer_drains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = threading.Event()
    real_write = _spill._write_all

    def gated(fd: int, data: list[bytes]) -> None:
        gate.wait(30)
        real_write(fd, data)

    monkeypatch.setattr(_spill, "_write_all", gated)
    events: list[str] = []
    session = CaptureSession(
        CaptureOptions(limits=ShellOutputLimits(max_bytes=100), spill_high_water=1000),
        spill_dir=tmp_path / "spill",
        on_pause=lambda: events.append("pause"),
        on_resume=lambda: events.append("resume"),
        clock=FakeClock(),
    )
    raw = b"".join(f"{i:04d} line\n".encode() for i in range(300))
    for i in range(0, len(raw), 500):
        session.feed(raw[i : i + 500])
    assert events == ["pause"]  # the writer is stuck: reading must stop
    assert session.spill is not None and session.spill.buffered > 1000
    gate.set()
    view = await asyncio.wait_for(session.finish(), 30)
    assert events == ["pause", "resume"]
    assert Path(view.metadata.spill_path or "").read_bytes() == raw


def test_wire_dicts_are_validated_with_the_field_named() -> None:
    v = _view("abc\n")
    good = execenv.update_to_dict(Slide(1, "x", v.metadata))
    assert execenv.update_from_dict(good) == Slide(1, "x", v.metadata)
    with pytest.raises(UpdateError, match=r"field slide\.drop must be int, got '1'"):
        execenv.update_from_dict({**good, "drop": "1"})
    bad_meta = {**good, "metadata": {**good["metadata"], "truncation": {"truncated": True}}}
    with pytest.raises(UpdateError, match=r"metadata\.truncation has no 'truncated_by' field"):
        execenv.update_from_dict(bad_meta)
    with pytest.raises(UpdateError, match="unknown shell output update type 'zap'"):
        execenv.update_from_dict({**good, "type": "zap"})


def test_head_tail_capture_options_cross_the_exec_host_wire() -> None:
    from toolfold.execenv import CaptureOptions, ShellOutputLimits
    from toolfold.execenv._protocol import capture_from_dict, capture_to_dict

    options = CaptureOptions(
        limits=ShellOutputLimits(max_bytes=4096, max_lines=50, retain="head_tail", head_share=0.3)
    )
    wire = capture_to_dict(options)
    assert wire["retain"] == "head_tail" and wire["head_share"] == 0.3
    assert capture_from_dict(wire) == options
    # A client from before head_tail sends no head_share: the default applies.
    del wire["head_share"]
    assert capture_from_dict({**wire, "retain": "tail"}).limits.head_share == 0.2
    # A bad share is the options' own one-line error.
    with pytest.raises(ExecConfigError, match="head_share must be between 0 and 1"):
        capture_from_dict({**wire, "head_share": 1.5})


def test_the_default_shell_is_found_as_shutil_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exec env looks ``bash`` up on ``PATH`` itself (no ``shutil`` import on every
    run): the first executable file wins; a directory or a file without the execute
    bit named ``bash`` is skipped; none at all falls back to ``/bin/sh``."""
    import shutil

    from toolfold.execenv._local import _default_shell

    assert _default_shell() == (shutil.which("bash") or "/bin/sh")
    not_executable, a_directory, found = (tmp_path / n for n in ("a", "b", "c"))
    for d in (not_executable, a_directory, found):
        d.mkdir()
    (not_executable / "bash").write_text("#!/bin/sh\n")
    (not_executable / "bash").chmod(0o644)
    (a_directory / "bash").mkdir()
    (found / "bash").write_text("#!/bin/sh\n")
    (found / "bash").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join(map(str, (not_executable, a_directory, found))))
    assert _default_shell() == str(found / "bash") == shutil.which("bash")
    monkeypatch.setenv("PATH", os.pathsep.join(map(str, (not_executable, a_directory))))
    assert _default_shell() == "/bin/sh"
    assert shutil.which("bash") is None
