"""The images of a call's result, for ``toolfold show``: a one-line summary, and
writing them to files (``--save-images DIR``)."""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import Any

from toolfold._fsperm import PRIVATE_FILE, make_private_dirs
from toolfold._units import format_bytes, plural

from ._errors import CliError

_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def _images(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "image"]


def _decoded(block: dict[str, Any]) -> bytes | None:
    data = block.get("data")
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def image_summary(content: Any) -> str:
    """``[2 images: image/png 34 KiB, image/jpeg 1.2 KiB]``, or ``""`` when there are none
    (the text printed alone would hide that the model also received images)."""
    images = _images(content)
    if not images:
        return ""
    parts = []
    for block in images:
        raw = _decoded(block)
        size = format_bytes(len(raw)) if raw is not None else "undecodable"
        parts.append(f"{block.get('mime_type', '?')} {size}")
    return f"[{plural(len(images), 'image')}: {', '.join(parts)}]"


def save_images(content: Any, directory: Path, stem: str) -> list[Path]:
    """Write each image to ``directory/STEM-N.EXT`` (files 0600, a created directory
    0700). An existing file is never overwritten: the call fails naming it."""
    images = _images(content)
    try:
        make_private_dirs(directory)
    except OSError as exc:
        raise CliError(f"cannot create --save-images directory {str(directory)!r}: {exc}") from exc
    planned: list[tuple[Path, bytes]] = []
    for n, block in enumerate(images, start=1):
        raw = _decoded(block)
        if raw is None:
            raise CliError(f"image {n} of call {stem} is not valid base64; nothing was written")
        ext = _EXTENSIONS.get(str(block.get("mime_type")), "bin")
        planned.append((directory / f"{stem}-{n}.{ext}", raw))
    # Refuse before writing anything, so a refusal leaves no half-saved set behind.
    for path, _ in planned:
        if os.path.lexists(path):
            raise CliError(
                f"{str(path)!r} already exists; choose another --save-images directory "
                "or remove it (toolfold never overwrites a file)"
            )
    written: list[Path] = []
    for path, raw in planned:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(path, flags, PRIVATE_FILE)
        except FileExistsError as exc:
            raise CliError(
                f"{str(path)!r} already exists; choose another --save-images directory "
                "or remove it (toolfold never overwrites a file)"
            ) from exc
        except OSError as exc:
            raise CliError(f"cannot write {str(path)!r}: {exc}") from exc
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        written.append(path)
    return written
