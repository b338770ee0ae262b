"""Image blocks of a tool's output: building one and checking one before it is kept."""

from __future__ import annotations

from typing import Any

from ._errors import OutputValueError
from ._state import ImageContent


def image_block(data: bytes, mime_type: str) -> ImageContent:
    """An ``ImageContent`` block for raw image bytes (base64-encodes them)."""
    import base64  # with the first image: text-only output never needs it

    return {"type": "image", "data": base64.b64encode(data).decode("ascii"), "mime_type": mime_type}


def check_image(image: Any, index: int) -> int:
    """Check that ``image`` (the ``index``-th block) is a base64 image block; return its
    decoded size in bytes."""
    where = f"image {index} of the tool output"
    if not isinstance(image, dict) or image.get("type") != "image":
        raise OutputValueError(
            f"{where} must be {{'type': 'image', 'data': <base64>, 'mime_type': ...}}, "
            f"got {image!r:.120}"
        )
    data, mime = image.get("data"), image.get("mime_type")
    if not isinstance(mime, str) or not mime.startswith("image/"):
        raise OutputValueError(f"{where} has mime_type {mime!r}; use e.g. 'image/png'")
    if not isinstance(data, str):
        raise OutputValueError(f"{where} data must be a base64 str, got {type(data).__name__}")
    import base64
    import binascii

    try:
        size = len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise OutputValueError(
            f"{where} data is not valid base64 ({exc}); encode the bytes with "
            "base64.b64encode(raw).decode('ascii') or use image_block()"
        ) from exc
    return size
