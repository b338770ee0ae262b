"""What ``toolfold show`` tells a person about a call: that its result holds images (and
writing them to files on request), and no placeholder for what is unknown."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest
from cli_helpers import one_error_line, toolfold
from pydantic import BaseModel

from toolfold.cli._inspect import _print_settled
from toolfold.harness import Harness, ToolCall, ToolContext, tool
from toolfold.history import CallView
from toolfold.output import ToolOutput, image_block
from toolfold.storage import open_repository

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 136  # 34 KiB + 8 bytes
JPEG = b"\xff\xd8\xff" + b"j" * 1226  # 1.2 KiB


class NoParams(BaseModel):
    pass


@tool(params=NoParams)
async def screenshot(
    tool_call_id: str,
    params: NoParams,
    cancel: asyncio.Event,
    out: ToolOutput,
    context: ToolContext,
) -> None:
    """Take two screenshots."""
    out.write("two shots\n")
    out.image(image_block(PNG, "image/png"))
    out.image(image_block(JPEG, "image/jpeg"))


def _store(tmp_path: Path) -> str:
    url = f"sqlite:{tmp_path / 't.db'}"

    async def record() -> None:
        repo = open_repository(url)
        try:
            session = await repo.create_session("pics")
            await Harness([screenshot], session=session).run([ToolCall("shot1", "screenshot", {})])
            await session.close()
        finally:
            await repo.close()

    asyncio.run(record())
    return url


def test_show_names_the_images_and_saves_them_private(tmp_path: Path) -> None:
    url = _store(tmp_path)
    shown = toolfold("show", "pics", "1", "--store", url, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "two shots\n"  # stdout stays the model's text
    assert "[2 images: image/png 34 KiB, image/jpeg 1.2 KiB]" in shown.stderr.splitlines()

    os.umask(0o022)
    out = tmp_path / "shots"
    saved = toolfold(
        "show", "pics", "shot1", "--store", url, "--save-images", str(out), cwd=tmp_path
    )
    assert saved.returncode == 0, saved.stderr
    png, jpg = out / "shot1-1.png", out / "shot1-2.jpg"
    assert f"saved 2 images: {png}, {jpg}" in saved.stderr
    assert png.read_bytes() == PNG and jpg.read_bytes() == JPEG
    assert stat.S_IMODE(png.stat().st_mode) == 0o600 == stat.S_IMODE(jpg.stat().st_mode)
    assert stat.S_IMODE(out.stat().st_mode) == 0o700

    # An existing file is never overwritten: one line naming it, the file unchanged.
    png.write_bytes(b"mine")
    again = toolfold("show", "pics", "1", "--store", url, "--save-images", str(out), cwd=tmp_path)
    assert f"{str(png)!r} already exists" in one_error_line(again)
    assert png.read_bytes() == b"mine"

    listing = toolfold("show", "pics", "--store", url, "--save-images", str(out), cwd=tmp_path)
    assert "--save-images needs a CALL" in one_error_line(listing)


def test_a_result_without_images_says_nothing_about_images(tmp_path: Path) -> None:
    url = f"sqlite:{tmp_path / 't.db'}"
    made = toolfold("run", "--store", url, "--session", "s", "--", "echo hi", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    shown = toolfold("show", "s", "1", "--store", url, cwd=tmp_path)
    assert shown.stdout == "hi\n" and "image" not in shown.stderr


def test_a_cancelled_call_shows_no_unknown_details(capsys: pytest.CaptureFixture[str]) -> None:
    # A cancelled command has no exit code: the header leaves it out instead of "None".
    message = {
        "content": [{"type": "text", "text": "partial\n[Tool call cancelled]"}],
        "details": {"exit_code": None, "signal": None, "duration": 1.5},
        "outcome": "cancelled",
        "is_error": True,
    }
    _print_settled(CallView(1, "c1", "bash", True, message))
    captured = capsys.readouterr()
    assert captured.err == "call c1 (bash): settled, cancelled; details: duration=1.5\n"
    assert "None" not in captured.err
    message["details"] = {"exit_code": None}
    _print_settled(CallView(1, "c1", "bash", True, message))
    assert capsys.readouterr().err == "call c1 (bash): settled, cancelled\n"
