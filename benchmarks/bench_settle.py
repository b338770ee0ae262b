"""Settlement benchmark: bytes one lane subscriber receives for a call with a big image.

Run: .venv/bin/python benchmarks/bench_settle.py

A real ``Harness`` runs one call that writes 10 KB of text and one 1 MiB image
(random bytes, so base64 cannot be beaten) and settles; the bus feeds ``Lanes``,
and one subscription of the lane, from before the run until after it settled,
counts the wire bytes it was handed (the SSE ``data:`` payloads plus their
``id:`` framing). The floor is the base64 image plus the text: what a subscriber
must receive at least to show the call once.

Not measured: HTTP/TLS framing and compression, and several calls sharing a
subscription (each call's result crosses once in either design).
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from toolfold.harness import Harness, ToolCall, tool  # noqa: E402
from toolfold.harness._lane import Lanes  # noqa: E402
from toolfold.output import image_block  # noqa: E402

IMAGE = os.urandom(1024 * 1024)
TEXT = "".join(f"line {i:04d} of the tool's text output.....\n" for i in range(228))[:10_240]


class _NoParams(BaseModel):
    pass


@tool(params=_NoParams, name="draw")
async def draw(tool_call_id: str, params: _NoParams, cancel: Any, out: Any, context: Any) -> None:
    """Writes text and one image."""
    out.write(TEXT)
    await asyncio.sleep(0)
    out.image(image_block(IMAGE, "image/png"))


async def _run() -> dict[str, int]:
    lanes = Lanes()
    harness = Harness([draw], lane="bench")
    harness.bus.add_listener(lanes.handle)
    sub = lanes.host("bench").subscribe()
    await harness.run([ToolCall("call-1", "draw", {})])
    received = 0
    batches = 0
    while (batch := sub.next_nowait()) is not None:
        received += len(f"id: {batch.id}\ndata: {batch.data}\n\n".encode())
        batches += 1
    floor = len(base64.b64encode(IMAGE)) + len(TEXT.encode())
    view = lanes.host("bench").view
    entry = view["transcript"][-1]
    return {
        "received": received,
        "batches": batches,
        "floor": floor,
        "referenced": int("output_ref" in entry),
    }


def main() -> None:
    r = asyncio.run(_run())
    print("## Settlement: bytes per lane subscriber (1 MiB image + 10 KB text, one call)\n")
    print("| received bytes | batches | base64 image + text | ratio | transcript entry |")
    print("|---:|---:|---:|---:|---|")
    ratio = r["received"] / r["floor"]
    how = "refers to the folded output" if r["referenced"] else "copies the result"
    print(f"| {r['received']:,} | {r['batches']} | {r['floor']:,} | {ratio:.3f}x | {how} |")


if __name__ == "__main__":
    main()
